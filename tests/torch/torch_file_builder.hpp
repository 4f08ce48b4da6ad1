// SPDX-License-Identifier: MIT
// Test helpers that craft torch files byte by byte: a small pickle writer and a stored-zip writer; file helpers.
#pragma once

#include <tensorfile/detail/zip/crc32.hpp>
#include <tensorfile/formats/torch/detail/opcodes.hpp>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "tensorfile_catch.hpp"  // data_dir()

namespace tensorfile_test {

using tensorfile::detail::Op;

/// Appends pickle opcodes; each method returns *this so streams read like the disassembly.
class PickleWriter {
 public:
  PickleWriter& proto(int version = 2) { return op(Op::proto).byte(static_cast<std::uint8_t>(version)); }
  PickleWriter& global(const std::string& module, const std::string& name) {
    return op(Op::global).text(module + "\n" + name + "\n");
  }
  PickleWriter& mark() { return op(Op::mark); }
  PickleWriter& tuple() { return op(Op::tuple); }
  PickleWriter& empty_tuple() { return op(Op::empty_tuple); }
  PickleWriter& empty_dict() { return op(Op::empty_dict); }
  PickleWriter& empty_list() { return op(Op::empty_list); }
  PickleWriter& append() { return op(Op::append); }
  PickleWriter& setitem() { return op(Op::setitem); }
  PickleWriter& setitems() { return op(Op::setitems); }
  PickleWriter& reduce() { return op(Op::reduce); }
  PickleWriter& build() { return op(Op::build); }
  PickleWriter& persid() { return op(Op::binpersid); }
  PickleWriter& none() { return op(Op::none); }
  PickleWriter& boolean(bool v) { return op(v ? Op::newtrue : Op::newfalse); }
  PickleWriter& stop() { return op(Op::stop); }
  PickleWriter& put(std::uint8_t index) { return op(Op::binput).byte(index); }
  PickleWriter& get(std::uint8_t index) { return op(Op::binget).byte(index); }
  PickleWriter& integer(std::int32_t v) {
    op(Op::binint);
    for (int i = 0; i < 4; ++i) byte(static_cast<std::uint8_t>(static_cast<std::uint32_t>(v) >> (8 * i)));
    return *this;
  }
  PickleWriter& string(const std::string& s) {
    op(Op::binunicode);
    for (int i = 0; i < 4; ++i) byte(static_cast<std::uint8_t>(s.size() >> (8 * i)));
    return text(s);
  }
  PickleWriter& int_tuple(const std::vector<std::int32_t>& values) {
    mark();
    for (auto v : values) integer(v);
    return tuple();
  }
  /// ('storage', torch.<type>, key, location, numel) BINPERSID
  PickleWriter& storage(const std::string& type, const std::string& key, std::int32_t numel,
                        const std::string& location = "cpu") {
    return mark().string("storage").global("torch", type).string(key).string(location).integer(numel).tuple().persid();
  }
  /// _rebuild_tensor_v2(storage, offset, size, stride, False, OrderedDict())
  PickleWriter& tensor(const std::string& type, const std::string& key, std::int32_t numel, std::int32_t offset,
                       const std::vector<std::int32_t>& size, const std::vector<std::int32_t>& stride) {
    global("torch._utils", "_rebuild_tensor_v2").mark();
    storage(type, key, numel).integer(offset).int_tuple(size).int_tuple(stride).boolean(false);
    return global("collections", "OrderedDict").empty_tuple().reduce().tuple().reduce();
  }
  PickleWriter& raw(const std::string& bytes) { return text(bytes); }
  PickleWriter& op(Op code) { return byte(static_cast<std::uint8_t>(code)); }
  /// Any byte in an opcode's place, one the machine may not know (hostile inputs).
  PickleWriter& op(int code) { return byte(static_cast<std::uint8_t>(code)); }

  [[nodiscard]] const std::string& bytes() const { return bytes_; }

 private:
  PickleWriter& byte(std::uint8_t b) {
    bytes_.push_back(static_cast<char>(b));
    return *this;
  }
  PickleWriter& text(const std::string& s) {
    bytes_ += s;
    return *this;
  }
  std::string bytes_;
};

/// A zip of stored entries under `prefix/`, in the given order, with correct CRCs and a classic EOCD.
inline std::string torch_zip(const std::string& prefix,
                             const std::vector<std::pair<std::string, std::string>>& records) {
  std::string out;
  std::string central;
  const auto u16 = [](std::string& s, std::uint32_t v) {
    s.push_back(static_cast<char>(v & 0xFF));
    s.push_back(static_cast<char>((v >> 8) & 0xFF));
  };
  const auto u32 = [&](std::string& s, std::uint32_t v) {
    u16(s, v & 0xFFFF);
    u16(s, v >> 16);
  };
  for (const auto& [name, data] : records) {
    const std::string full = prefix + "/" + name;
    const auto crc = tensorfile::detail::crc32(std::as_bytes(std::span(data.data(), data.size())));
    const auto offset = static_cast<std::uint32_t>(out.size());
    u32(out, 0x04034b50);
    u16(out, 20);
    u16(out, 0);
    u16(out, 0);
    u16(out, 0);
    u16(out, 0);
    u32(out, crc);
    u32(out, static_cast<std::uint32_t>(data.size()));
    u32(out, static_cast<std::uint32_t>(data.size()));
    u16(out, static_cast<std::uint32_t>(full.size()));
    u16(out, 0);
    out += full + data;
    u32(central, 0x02014b50);
    u16(central, 20);
    u16(central, 20);
    u16(central, 0);
    u16(central, 0);
    u16(central, 0);
    u16(central, 0);
    u32(central, crc);
    u32(central, static_cast<std::uint32_t>(data.size()));
    u32(central, static_cast<std::uint32_t>(data.size()));
    u16(central, static_cast<std::uint32_t>(full.size()));
    u16(central, 0);
    u16(central, 0);
    u16(central, 0);
    u16(central, 0);
    u32(central, 0);
    u32(central, offset);
    central += full;
  }
  const auto central_offset = static_cast<std::uint32_t>(out.size());
  out += central;
  u32(out, 0x06054b50);
  u16(out, 0);
  u16(out, 0);
  u16(out, static_cast<std::uint32_t>(records.size()));
  u16(out, static_cast<std::uint32_t>(records.size()));
  u32(out, static_cast<std::uint32_t>(central.size()));
  u32(out, central_offset);
  u16(out, 0);
  return out;
}

/// A one-tensor torch file: data.pkl from `pickle`, record data/0 of `record`, version 3.
inline std::string torch_file(const std::string& pickle, const std::string& record) {
  return torch_zip("archive", {{"data.pkl", pickle}, {"data/0", record}, {"version", "3\n"}});
}

/// The whole file at `path` (empty when it cannot be read).
inline std::string file_bytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

/// Writes `bytes` as the whole file at `path`.
inline void write_file(const std::filesystem::path& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

/// The bytes of a string, as the loaders take them.
inline std::span<const std::byte> byte_span(const std::string& s) {
  return std::as_bytes(std::span(s.data(), s.size()));
}

}  // namespace tensorfile_test
