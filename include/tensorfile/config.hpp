// SPDX-License-Identifier: MIT
// Header-only (the default) or separately compiled: where the bodies of tensorfile's heavy functions are compiled.
#pragma once

// A public header declares its heavy functions (the loaders, the savers, printing, conversion kernels) with
// TENSORFILE_ENTRY and defines them further down, under `#if TENSORFILE_DEFINITIONS`, after the includes only
// those bodies need. Header-only, every TU parses the bodies and TENSORFILE_ENTRY is `inline`.
//
// With TENSORFILE_SEPARATE_COMPILATION defined in every TU of a program (the tensorfile::compiled CMake target
// sets it for its users), a TU sees the declarations only, which is what makes including the umbrella header
// cheap; the bodies are compiled once, in include/tensorfile/separate_compilation.cpp, which defines
// TENSORFILE_COMPILING_DEFINITIONS. Mixing the two modes in one program breaks the one-definition rule, so it is
// a link error (below).
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

// The mode check: a header-only TU defines the symbol below as a thread-local variable; a compiled-mode TU refers to
// it as a plain constant, which separate_compilation.cpp defines. A program that mixes the modes fails to link ("TLS
// definition ... mismatches non-TLS reference"), and one built in compiled mode without tensorfile::compiled gets an
// undefined reference; both messages name the symbol, whose name says the fix. Nothing runs or is read at run time.
namespace tensorfile::detail {
#if defined(TENSORFILE_SEPARATE_COMPILATION)
extern const int link_tensorfile_compiled_and_define_TENSORFILE_SEPARATE_COMPILATION_in_every_TU_or_in_none;
#if defined(TENSORFILE_COMPILING_DEFINITIONS)
const int link_tensorfile_compiled_and_define_TENSORFILE_SEPARATE_COMPILATION_in_every_TU_or_in_none = 1;
#else
[[gnu::used]] inline const int* const compiled_mode_check =
    &link_tensorfile_compiled_and_define_TENSORFILE_SEPARATE_COMPILATION_in_every_TU_or_in_none;
#endif
#else
[[gnu::used]] inline thread_local int
    link_tensorfile_compiled_and_define_TENSORFILE_SEPARATE_COMPILATION_in_every_TU_or_in_none = 0;
#endif
}  // namespace tensorfile::detail
