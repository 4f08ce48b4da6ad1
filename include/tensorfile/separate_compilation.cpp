// SPDX-License-Identifier: MIT
// The translation unit of tensorfile::compiled: every function that the public headers declare with
// TENSORFILE_ENTRY, defined once (see tensorfile/config.hpp). Without CMake, compile this file with
// -DTENSORFILE_SEPARATE_COMPILATION, as every other TU of the program. CMake compiles it once per library part,
// with TENSORFILE_LIBRARY_PART set, so that the parts build in parallel.
#if !defined(TENSORFILE_SEPARATE_COMPILATION)
#error "compile separate_compilation.cpp with TENSORFILE_SEPARATE_COMPILATION defined, as every TU of the program"
#endif
#define TENSORFILE_COMPILING_DEFINITIONS
#include "tensorfile/formats/torch/detail/global_verdicts.hpp"  // its bodies' part may hold no header that includes it
#include "tensorfile/tensorfile.hpp"
