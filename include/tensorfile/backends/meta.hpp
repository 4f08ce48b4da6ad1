// SPDX-License-Identifier: MIT
// Forwarding header: moved to <tensorfile/core/meta_backend.hpp>; this path goes away in the next minor release.
#pragma once
#include "tensorfile/core/meta_backend.hpp"
