// SPDX-License-Identifier: MIT
// Forwarding header: moved to <tensorfile/cuda/backend.hpp>; this path goes away in the next minor release.
#pragma once
#include "tensorfile/cuda/backend.hpp"
