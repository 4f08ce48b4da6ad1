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

// tensorfile::compiled builds in parts that compile in parallel (CMake makes one TU per part number below, each
// defining TENSORFILE_LIBRARY_PART and including separate_compilation.cpp; 0, the default, compiles every part).
// A header's entry bodies stand under TENSORFILE_DEFINITIONS_OF(<its path under tensorfile/, '/' as '_'>) and
// belong to the part its TENSORFILE_PART_ line names; helpers that other headers' bodies use stand before them,
// under plain TENSORFILE_DEFINITIONS, and are compiled where they are used. The parts are balanced by CPU time at
// -O3 (tests/benchmarks/compile_time.sh prints each part's); tests/layering/check_layers.py fails on a header
// missing here.
#if !defined(TENSORFILE_LIBRARY_PART)
#define TENSORFILE_LIBRARY_PART 0
#endif
#define TENSORFILE_PART_checkpoint 1
#define TENSORFILE_PART_core_convert 1
#define TENSORFILE_PART_core_heap_backend 1
#define TENSORFILE_PART_core_meta_backend 1
#define TENSORFILE_PART_core_print 1
#define TENSORFILE_PART_core_tensor 1
#define TENSORFILE_PART_detail_posix_mapping 1
#define TENSORFILE_PART_formats_gguf_load 1
#define TENSORFILE_PART_formats_numpy_npy 1
#define TENSORFILE_PART_formats_safetensors_header 1
#define TENSORFILE_PART_formats_safetensors_load 1
#define TENSORFILE_PART_formats_safetensors_save 1
#define TENSORFILE_PART_formats_select 1
#define TENSORFILE_PART_formats_slice 1
#define TENSORFILE_PART_formats_source 1
#define TENSORFILE_PART_formats_tensordict_load_memmap 1
#define TENSORFILE_PART_formats_tensordict_tensordict 1
#define TENSORFILE_PART_formats_torch_archive 1
#define TENSORFILE_PART_formats_torch_save 1
#define TENSORFILE_PART_backends_mmap 2
#define TENSORFILE_PART_core_shape 2
#define TENSORFILE_PART_core_value 2
#define TENSORFILE_PART_core_value_print 2
#define TENSORFILE_PART_formats_gguf_dequantize 2
#define TENSORFILE_PART_formats_gguf_header 2
#define TENSORFILE_PART_formats_gguf_save 2
#define TENSORFILE_PART_formats_map_location 2
#define TENSORFILE_PART_formats_numpy_npy_header 2
#define TENSORFILE_PART_formats_numpy_npz 2
#define TENSORFILE_PART_formats_safetensors_save_sharded 2
#define TENSORFILE_PART_formats_tensordict_save_memmap 2
#define TENSORFILE_PART_formats_tensordict_value_tree 2
#define TENSORFILE_PART_formats_torch_detail_global_verdicts 2
#define TENSORFILE_PART_formats_torch_load 2
#define TENSORFILE_PART_io_from_file 2
#define TENSORFILE_PART_scan 2
#define TENSORFILE_PART_state_dict 2
#define TENSORFILE_PART_verify 2

/// @def TENSORFILE_DEFINITIONS_OF
/// Guards the entry bodies of one header (named by its path under tensorfile/): 1 where this TU compiles them
/// (every TU header-only; in compiled mode, the library part config.hpp assigns the header to).
#define TENSORFILE_DEFINITIONS_OF(header) \
  (TENSORFILE_DEFINITIONS && (TENSORFILE_LIBRARY_PART == 0 || TENSORFILE_LIBRARY_PART == TENSORFILE_PART_##header))

#include "tensorfile/detail/mode_check.hpp"  // one mode per program, checked at link time
