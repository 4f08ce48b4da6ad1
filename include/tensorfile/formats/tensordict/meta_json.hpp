// SPDX-License-Identifier: MIT
// Forwarding header: moved to <tensorfile/formats/tensordict/detail/meta_schema.hpp>; this path goes away in the next
// minor release.
#pragma once
#include "tensorfile/formats/tensordict/detail/meta_schema.hpp"
