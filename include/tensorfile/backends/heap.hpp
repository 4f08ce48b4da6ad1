// SPDX-License-Identifier: MIT
// Forwarding header: moved to <tensorfile/core/heap_backend.hpp>; this path goes away in the next minor release.
#pragma once
#include "tensorfile/core/heap_backend.hpp"
