// SPDX-License-Identifier: MIT
// The one translation unit of tensorfile::compiled: every function that the public headers declare with
// TENSORFILE_ENTRY, defined once (see tensorfile/config.hpp). Without CMake, compile this file with
// -DTENSORFILE_SEPARATE_COMPILATION, as every other TU of the program.
#if !defined(TENSORFILE_SEPARATE_COMPILATION)
#error "compile separate_compilation.cpp with TENSORFILE_SEPARATE_COMPILATION defined, as every TU of the program"
#endif
#define TENSORFILE_COMPILING_DEFINITIONS
#include "tensorfile/tensorfile.hpp"
