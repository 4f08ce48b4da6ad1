// SPDX-License-Identifier: MIT
/// @file
/// The one source of tensorfile's version; CMake parses these three lines.
#pragma once

/// Major version: a change breaks the API.
#define TENSORFILE_VERSION_MAJOR 0
/// Minor version: features added.
#define TENSORFILE_VERSION_MINOR 3
/// Patch version: fixes only.
#define TENSORFILE_VERSION_PATCH 0

/// The version as one integer: major * 10000 + minor * 100 + patch.
#define TENSORFILE_VERSION \
  (TENSORFILE_VERSION_MAJOR * 10000 + TENSORFILE_VERSION_MINOR * 100 + TENSORFILE_VERSION_PATCH)
