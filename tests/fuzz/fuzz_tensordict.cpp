// SPDX-License-Identifier: MIT
// libFuzzer harness: load_memmap over a tree written to a scratch directory from the input.
// Input: the root meta.json, then records "\0F<relative path>\n<contents>" (paths are sanitized so
// the harness only ever writes inside its scratch directory; the loader itself is not restricted).
#include <tensorfile/formats/tensordict/load_memmap.hpp>

#include "fuzz_common.hpp"

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

namespace fs = std::filesystem;

namespace {
const fs::path& scratch() {
  static const fs::path dir = [] {
    fs::path d = fs::temp_directory_path() / ("tensorfile-fuzz-td-" + std::to_string(::getpid()));
    fs::create_directories(d);
    return d;
  }();
  return dir;
}

bool safe_relative(std::string_view name) {
  if (name.empty() || name.size() > 64 || name.front() == '/') return false;
  int parts = 0;
  std::size_t start = 0;
  while (start <= name.size()) {
    const std::size_t slash = name.find('/', start);
    const std::string_view part =
        name.substr(start, slash == std::string_view::npos ? std::string_view::npos : slash - start);
    if (part.empty() || part == "." || part == ".." || ++parts > 4) return false;
    for (char c : part) {
      if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.')) return false;
    }
    if (slash == std::string_view::npos) break;
    start = slash + 1;
  }
  return true;
}

void put(const fs::path& root, std::string_view name, std::string_view contents) {
  if (!safe_relative(name)) return;
  const fs::path p = root / std::string(name);
  std::error_code ec;
  fs::create_directories(p.parent_path(), ec);
  if (fs::is_directory(p, ec)) return;
  std::ofstream(p, std::ios::binary).write(contents.data(), static_cast<std::streamsize>(contents.size()));
}

void walk(const tensorfile::TensorDict& td, int depth = 0) {
  if (depth > 1000) __builtin_trap();
  for (const auto& [key, entry] : td) {
    if (entry.is_tensor()) tensorfile_fuzz::touch(entry.as_tensor());
    if (entry.is_nested_tensor()) {
      const auto& n = entry.as_nested_tensor();
      tensorfile_fuzz::touch(n.values);
      for (std::int64_t i = 0; i < n.size() && i < 64; ++i) tensorfile_fuzz::touch(n.component(i));
    }
    if (entry.is_non_tensor()) tensorfile_fuzz::walk(entry.as_non_tensor().data());
    if (entry.is_tensordict()) walk(entry.as_tensordict(), depth + 1);
  }
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const fs::path root = scratch() / "td";
  std::error_code ec;
  fs::remove_all(root, ec);
  fs::create_directories(root);
  std::size_t at = input.find(std::string_view("\0F", 2));
  put(root, "meta.json", input.substr(0, at));
  while (at != std::string_view::npos) {
    const std::size_t name_end = input.find('\n', at + 2);
    if (name_end == std::string_view::npos) break;
    const std::size_t next = input.find(std::string_view("\0F", 2), name_end + 1);
    put(root, input.substr(at + 2, name_end - at - 2),
        input.substr(name_end + 1, next == std::string_view::npos ? std::string_view::npos : next - name_end - 1));
    at = next;
  }
  for (const auto access : {tensorfile::MapMode::read_only, tensorfile::MapMode::copy_on_write}) {
    try {
      const tensorfile::TensorDict td =
          tensorfile::load_memmap(root, {.mmap = access, .limits = {.max_meta_json_bytes = 1u << 20}});
      walk(td);
    } catch (const tensorfile::Error&) {
    }
  }
  try {
    (void)tensorfile::load_memmap(root, {.map_location = tensorfile::Device::meta()});
  } catch (const tensorfile::Error&) {
  }
  return 0;
}
