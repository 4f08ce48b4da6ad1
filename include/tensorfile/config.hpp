// SPDX-License-Identifier: MIT
/// @file
/// Header-only (the default) or separately compiled: where the bodies of tensorfile's heavy functions are compiled.
#pragma once

// A public header declares its heavy functions (the loaders, the savers, printing, conversion kernels) with
// TENSORFILE_ENTRY and defines them further down, under `#if TENSORFILE_DEFINITIONS`, after the includes only
// those bodies need. Header-only, every TU parses the bodies and TENSORFILE_ENTRY is `inline`.
//
// With TENSORFILE_SEPARATE_COMPILATION defined in every TU of a program (the tensorfile::compiled CMake target
// sets it for its users), a TU sees the declarations only, which is what makes including the umbrella header
// cheap; the bodies are compiled once, in include/tensorfile/separate_compilation.cpp, which defines
// TENSORFILE_COMPILING_DEFINITIONS. Mixing the two modes in one program breaks the one-definition rule, so it is
// a link error (detail/mode_check.hpp).

/// @def TENSORFILE_ENTRY
/// Marks a heavy function's declaration: `inline` header-only, nothing in compiled mode (one definition, in the
/// compiled library).

/// @def TENSORFILE_DEFINITIONS
/// 1 where this translation unit compiles the heavy functions' bodies (every TU header-only, only
/// separate_compilation.cpp in compiled mode), else 0.

#if defined(TENSORFILE_SEPARATE_COMPILATION)
#define TENSORFILE_ENTRY
#if defined(TENSORFILE_COMPILING_DEFINITIONS)
#define TENSORFILE_DEFINITIONS 1
#else
#define TENSORFILE_DEFINITIONS 0
#endif
#else
#define TENSORFILE_ENTRY inline
#define TENSORFILE_DEFINITIONS 1
#endif

#include "tensorfile/detail/mode_check.hpp"  // one mode per program, checked at link time
