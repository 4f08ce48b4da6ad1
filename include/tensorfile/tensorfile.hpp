// SPDX-License-Identifier: MIT
/// @file
/// The umbrella header: everything tensorfile offers on the host (CUDA lives in <tensorfile/cuda.hpp>).
#pragma once

#include "tensorfile/version.hpp"

#include "tensorfile/core/convert.hpp"
#include "tensorfile/core/device.hpp"
#include "tensorfile/core/dtype.hpp"
#include "tensorfile/core/error.hpp"
#include "tensorfile/core/heap_backend.hpp"
#include "tensorfile/core/meta_backend.hpp"
#include "tensorfile/core/print.hpp"
#include "tensorfile/core/scalar_types.hpp"
#include "tensorfile/core/storage.hpp"
#include "tensorfile/core/tensor.hpp"
#include "tensorfile/core/tensor_view.hpp"
#include "tensorfile/core/value.hpp"
#include "tensorfile/core/value_print.hpp"

#include "tensorfile/backends/borrowed.hpp"
#include "tensorfile/backends/mmap.hpp"

#include "tensorfile/io/from_buffer.hpp"
#include "tensorfile/io/from_file.hpp"

#include "tensorfile/formats/format.hpp"
#include "tensorfile/formats/source.hpp"

#include "tensorfile/formats/torch/archive.hpp"
#include "tensorfile/formats/torch/load.hpp"
#include "tensorfile/formats/torch/save.hpp"

#include "tensorfile/formats/gguf/dequantize.hpp"
#include "tensorfile/formats/gguf/ggml_types.hpp"
#include "tensorfile/formats/gguf/header.hpp"
#include "tensorfile/formats/gguf/load.hpp"
#include "tensorfile/formats/gguf/save.hpp"

#include "tensorfile/formats/safetensors/header.hpp"
#include "tensorfile/formats/safetensors/load.hpp"
#include "tensorfile/formats/safetensors/save.hpp"
#include "tensorfile/formats/safetensors/save_sharded.hpp"

#include "tensorfile/formats/tensordict/load_memmap.hpp"
#include "tensorfile/formats/tensordict/save_memmap.hpp"
#include "tensorfile/formats/tensordict/tensordict.hpp"
#include "tensorfile/formats/tensordict/value_tree.hpp"

#include "tensorfile/formats/numpy/npy.hpp"
#include "tensorfile/formats/numpy/npy_header.hpp"
#include "tensorfile/formats/numpy/npz.hpp"

#include "tensorfile/checkpoint.hpp"
#include "tensorfile/scan.hpp"
#include "tensorfile/state_dict.hpp"
#include "tensorfile/verify.hpp"

/// @namespace tensorfile
/// Tensors from and to files: torch.save, safetensors, NumPy .npy/.npz, tensordict memmap trees and GGUF (read only),
/// read on the heap, as views of one memory mapping, or as meta tensors. `open()`, `load()` and `save()`
/// (checkpoint.hpp) take any format; the per-format functions are the long form.
