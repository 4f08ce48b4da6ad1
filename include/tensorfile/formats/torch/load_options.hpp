// SPDX-License-Identifier: MIT
// Forwarding header: moved to <tensorfile/formats/options.hpp>; this path goes away in the next minor release.
#pragma once
#include "tensorfile/formats/options.hpp"
