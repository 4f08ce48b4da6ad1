// SPDX-License-Identifier: MIT
// Forwarding header: moved to <tensorfile/formats/torch/detail/storage_types.hpp>; this path goes away in the next
// minor release.
#pragma once
#include "tensorfile/formats/torch/detail/storage_types.hpp"
