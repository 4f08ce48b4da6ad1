// SPDX-License-Identifier: MIT
// libFuzzer harness: a llama.cpp split GGUF model. The input is the parts' bytes, each before the separator
// "\n%%PART%%\n" (so that mutations keep the framing); there are as many parts as the name says: m-0000k-of-0000N.gguf.
// Every part is opened through an in-memory FolderReader (mapped and by ranges) and loaded whole: a set that opens
// holds every part's tensors, each with the bytes at its offset in its own part, and no tensor twice; any other
// set is a tensorfile::Error.
#include <tensorfile/checkpoint.hpp>
#include <tensorfile/formats/gguf/header.hpp>

#include "fuzz_common.hpp"

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace {

constexpr std::string_view separator = "\n%%PART%%\n";

class PartReader final : public tensorfile::RangeReader {
 public:
  PartReader(std::span<const std::byte> bytes, std::string name, bool mapped)
      : bytes_(bytes), name_(std::move(name)), mapped_(mapped) {}
  std::size_t read(std::uint64_t offset, std::span<std::byte> out) override {
    if (offset >= bytes_.size()) return 0;
    const std::size_t n = std::min<std::size_t>(out.size(), bytes_.size() - static_cast<std::size_t>(offset));
    std::memcpy(out.data(), bytes_.data() + offset, n);
    return n;
  }
  std::optional<std::uint64_t> size() const override { return bytes_.size(); }
  std::string name() const override { return name_; }
  std::optional<std::span<const std::byte>> mapped() const override {
    if (!mapped_) return std::nullopt;
    return bytes_;
  }

 private:
  std::span<const std::byte> bytes_;
  std::string name_;
  bool mapped_;
};

/// The parts as files of a folder; `mapped` says whether their readers offer their memory.
class PartsFolder final : public tensorfile::FolderReader {
 public:
  PartsFolder(std::map<std::string, std::span<const std::byte>> files, bool mapped)
      : files_(std::move(files)), mapped_(mapped) {}
  std::unique_ptr<tensorfile::RangeReader> open(const std::string& relative) override {
    const auto found = files_.find(relative);
    if (found == files_.end()) return nullptr;
    return std::make_unique<PartReader>(found->second, relative, mapped_);
  }
  std::string name() const override { return "fuzz://split"; }

 private:
  std::map<std::string, std::span<const std::byte>> files_;
  bool mapped_;
};

std::optional<tensorfile::GgufHeader> parse(std::span<const std::byte> bytes) {
  try {
    return tensorfile::parse_gguf_header(bytes, "part.gguf");
  } catch (const tensorfile::Error&) {
    return std::nullopt;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  std::vector<std::span<const std::byte>> parts;
  for (std::size_t at = 0;;) {
    const std::size_t next = input.find(separator, at);
    const std::size_t end = next == std::string_view::npos ? size : next;
    parts.emplace_back(reinterpret_cast<const std::byte*>(data) + at, end - at);
    if (next == std::string_view::npos || parts.size() == 4) break;
    at = next + separator.size();
  }
  const auto count = static_cast<std::uint32_t>(parts.size());
  std::map<std::string, std::span<const std::byte>> files;
  for (std::uint32_t k = 0; k < count; ++k) files.emplace(tensorfile::gguf_split_file_name("m", k, count), parts[k]);

  std::vector<std::optional<tensorfile::GgufHeader>> headers;
  for (const std::span<const std::byte> part : parts) headers.push_back(parse(part));
  for (const bool mapped : {false, true}) {
    PartsFolder folder(files, mapped);
    for (std::uint32_t named = 0; named<count; named += count> 1 ? count - 1 : 1) {  // the first and the last
      // What a set that opens must hold: a part without split keys (or of split.count 1) is a file alone; a part of
      // a split model is every part's tensors, by name, with their bytes in the part that holds them. A part whose
      // header or split keys are refused cannot open.
      std::optional<tensorfile::GgufSplit> split;
      if (headers[named]) {
        try {
          split = tensorfile::gguf_split_of(*headers[named]);
        } catch (const tensorfile::Error&) {
        }
      }
      bool must_fail = !split;
      std::map<std::string, std::span<const std::byte>> expected;
      std::size_t total = 0;  // tensors in the parts read: more than `expected` holds when a name is in two
      for (std::uint32_t k = 0; k < count && !must_fail; ++k) {
        if (!split->is_split() && k != named) continue;
        if (!headers[k]) {
          must_fail = true;
          break;
        }
        total += headers[k]->tensors.size();
        for (const tensorfile::GgufTensorInfo& t : headers[k]->tensors) {
          expected.emplace(t.name,
                           parts[k].subspan(static_cast<std::size_t>(headers[k]->data_offset + t.offset), t.bytes));
        }
      }
      tensorfile::LoadOptions options;
      if (mapped) options.mmap = tensorfile::MapMode::read_only;
      std::optional<tensorfile::Checkpoint> checkpoint;
      try {
        checkpoint.emplace(tensorfile::open(
            tensorfile::Source::folder(folder, tensorfile::gguf_split_file_name("m", named, count)), options));
      } catch (const tensorfile::Error&) {
        continue;  // a refused set; any other exception escapes and is a finding
      }
      if (must_fail) __builtin_trap();  // a part that does not parse alone was read as part of the model
      const tensorfile::Value loaded = checkpoint->load_all();  // an opened set loads: no error past open()
      std::uint64_t visits = 0;
      tensorfile_fuzz::walk_from(loaded, 0, visits, std::uint64_t{1} << 30);
      if (checkpoint->entries().size() != loaded.as_dict().size() || loaded.as_dict().size() != total ||
          total != expected.size()) {
        __builtin_trap();  // a tensor lost, or one in two parts taken
      }
      for (const auto& [key, value] : loaded.as_dict()) {
        const auto found = expected.find(key.as_string());
        if (found == expected.end() || !value.is_tensor()) __builtin_trap();
        const tensorfile::Tensor& tensor = value.as_tensor();
        if (tensor.nbytes() != found->second.size()) __builtin_trap();
        if (tensor.nbytes() != 0 && std::memcmp(tensor.raw_data(), found->second.data(), tensor.nbytes()) != 0) {
          __builtin_trap();  // not the bytes of the part that holds it
        }
        if (mapped && tensor.nbytes() != 0 && tensor.raw_data() != found->second.data()) __builtin_trap();
      }
    }
  }
  return 0;
}
