// SPDX-License-Identifier: MIT
// Stream input shared by every format's loader: a std::istream read to its end into one heap storage.
#pragma once

#include <cerrno>
#include <cstring>
#include <istream>
#include <iterator>
#include <vector>

#include "tensorfile/core/error.hpp"
#include "tensorfile/core/heap_backend.hpp"
#include "tensorfile/core/storage.hpp"

namespace tensorfile::detail {

/// Reads `in` to its end into one new heap storage that the loaded tensors then share (the stream
/// overloads of load() and load_safetensors() funnel through it). Throws IoError when the stream fails.
[[nodiscard]] inline Storage read_stream_to_heap(std::istream& in) {
  std::vector<char> buffer((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) throw IoError("cannot read the stream", EIO);
  Storage whole = heap_storage(buffer.size(), false);
  if (!buffer.empty()) std::memcpy(whole.mutable_data(), buffer.data(), buffer.size());
  return whole;
}

}  // namespace tensorfile::detail
