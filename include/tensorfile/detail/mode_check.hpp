// SPDX-License-Identifier: MIT
// The link-time check that a program uses one mode of tensorfile/config.hpp: header-only or compiled, not both.
#pragma once

// A header-only TU defines the symbol below as a thread-local variable; a compiled-mode TU refers to
// it as a plain constant, which separate_compilation.cpp defines. A program that mixes the modes fails to link ("TLS
// definition ... mismatches non-TLS reference"), and one built in compiled mode without tensorfile::compiled gets an
// undefined reference; both messages name the symbol, whose name says the fix. Nothing runs or is read at run time.
namespace tensorfile::detail {
#if defined(TENSORFILE_SEPARATE_COMPILATION)
extern const int link_tensorfile_compiled_and_define_TENSORFILE_SEPARATE_COMPILATION_in_every_TU_or_in_none;
#if defined(TENSORFILE_COMPILING_DEFINITIONS)
#if TENSORFILE_LIBRARY_PART <= 1  // defined once: by the library's first part (or its one TU)
const int link_tensorfile_compiled_and_define_TENSORFILE_SEPARATE_COMPILATION_in_every_TU_or_in_none = 1;
#endif
#else
[[gnu::used]] inline const int* const compiled_mode_check =
    &link_tensorfile_compiled_and_define_TENSORFILE_SEPARATE_COMPILATION_in_every_TU_or_in_none;
#endif
#else
[[gnu::used]] inline thread_local int
    link_tensorfile_compiled_and_define_TENSORFILE_SEPARATE_COMPILATION_in_every_TU_or_in_none = 0;
#endif
}  // namespace tensorfile::detail
