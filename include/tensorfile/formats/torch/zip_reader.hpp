// SPDX-License-Identifier: MIT
// Forwarding header: moved to <tensorfile/detail/zip/reader.hpp>; this path goes away in the next minor release.
#pragma once
#include "tensorfile/detail/zip/reader.hpp"
