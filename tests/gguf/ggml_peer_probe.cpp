// SPDX-License-Identifier: MIT
// The tensorfile side of gguf.peer (check_with_ggml.py, which drives the real ggml through ctypes): prints what
// tensorfile's front door reads from a GGUF file, runs dequantize() and quantize() on raw blocks, and writes GGUF
// files with save_gguf, printing what it gave the writer. Everything it prints is JSON on stdout; floats travel as
// their bits and strings a file holds as hex, so that the script compares exactly.
//
// usage: ggml_peer_probe dump FILE
//        ggml_peer_probe dequantize TYPE_ID BLOCKS_IN FLOATS_OUT
//        ggml_peer_probe quantize TYPE_ID FLOATS_IN BLOCKS_OUT
//        ggml_peer_probe save DIR
#include <tensorfile/tensorfile.hpp>

#include <bit>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

namespace {

namespace tf = tensorfile;

std::vector<std::byte> read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path.string());
  const std::vector<char> chars((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::byte> out(chars.size());
  if (!out.empty()) std::memcpy(out.data(), chars.data(), out.size());
  return out;
}

void write_file(const std::filesystem::path& path, const void* data, std::size_t size) {
  std::ofstream out(path, std::ios::binary);
  out.write(static_cast<const char*>(data), static_cast<std::streamsize>(size));
  if (!out) throw std::runtime_error("cannot write " + path.string());
}

std::string hex(const void* data, std::size_t size) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * size + 2);
  out += '"';
  const auto* p = static_cast<const unsigned char*>(data);
  for (std::size_t i = 0; i < size; ++i) {
    out += digits[p[i] >> 4];
    out += digits[p[i] & 15];
  }
  out += '"';
  return out;
}

std::string json_string(std::string_view s) {
  std::string out = "\"";
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (u < 0x20) {
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\u%04x", u);
      out += escaped;
    } else {
      out += c;
    }
  }
  return out + '"';
}

// One metadata value of stored type `type` ("uint32", "array[string]"): ints in decimal, floats as the bits of
// their stored width, bools as JSON's, strings as hex, arrays as lists.
std::string json_value(const tf::Value& v, std::string_view type) {
  if (type.starts_with("array[")) {
    const std::string_view inner = type.substr(6, type.size() - 7);
    std::string out = "[";
    for (const tf::Value& item : v.elements()) {
      if (out.size() > 1) out += ',';
      out += json_value(item, inner);
    }
    return out + ']';
  }
  if (type == "array") {  // an array inside an array: a GGUF load names no type for its elements
    if (v.is_list() || v.is_tuple()) return json_value(v, "array[array]");
    if (v.is_float()) return json_value(v, "float64");
    return json_value(v, v.is_bool() ? "bool" : v.is_string() ? "string" : "int64");
  }
  if (type == "float32") return std::to_string(std::bit_cast<std::uint32_t>(static_cast<float>(v.as_float())));
  if (type == "float64") return std::to_string(std::bit_cast<std::uint64_t>(v.as_float()));
  if (type == "bool") return v.as_bool() ? "true" : "false";
  if (type == "string") return hex(v.as_string().data(), v.as_string().size());
  return v.is_big_int() ? v.as_big_int().str() : std::to_string(v.as_int());
}

// [[key, type, value], ...] of a metadata dict and its types, in the file's order.
std::string json_metadata(const tf::Value& metadata, const tf::Value& types) {
  std::string out = "[";
  for (const auto& [key, value] : metadata.as_dict().items()) {
    if (out.size() > 1) out += ',';
    const std::string& type = types.as_dict().find(key)->as_string();
    out += "[" + json_string(key.as_string()) + "," + json_string(type) + "," + json_value(value, type) + "]";
  }
  return out + ']';
}

std::string json_shape(const tf::Shape& shape) {
  std::string out = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) out += (i ? "," : "") + std::to_string(shape[i]);
  return out + ']';
}

// What one load gave: its metadata (with stored types) and every tensor's name, ggml type, shape and bytes.
std::string json_load(const tf::Value& loaded) {
  const tf::Dict& attributes = loaded.as_dict().attributes().as_dict();
  std::string out =
      "{\"metadata\":" + json_metadata(*attributes.find("__metadata__"), *attributes.find("__metadata_types__"));
  out += ",\"tensors\":[";
  bool first = true;
  for (const auto& [name, tensor] : tf::named_tensors(loaded)) {
    const std::optional<tf::GgmlType> type = tf::gguf_tensor_type(loaded, name);
    const tf::Tensor bytes = tensor.contiguous();
    out += std::string(first ? "" : ",") + "[" + json_string(name) + "," +
           std::to_string(static_cast<std::uint32_t>(type.value())) + "," + json_shape(tensor.sizes()) + "," +
           hex(bytes.raw_data(), bytes.nbytes()) + "]";
    first = false;
  }
  return out + "]}";
}

// The front door four ways (load and open, heap and mmap), open()'s entries, and dequantize() of every tensor it
// reads (float32 bits), so that the script compares each with ggml.
int dump(const std::filesystem::path& path) {
  const tf::Checkpoint heap = tf::open(path);
  const tf::Checkpoint mapped = tf::open(path, {.mmap = tf::MapMode::read_only});
  std::string out = "{\"loads\":{";
  out += "\"load\":" + json_load(tf::load(path));
  out += ",\"load_mmap\":" + json_load(tf::load(path, {.mmap = tf::MapMode::read_only}));
  out += ",\"load_threads\":" + json_load(tf::load(path, {.threads = 3}));
  out += ",\"open\":" + json_load(heap.load_all());
  out += ",\"open_mmap\":" + json_load(mapped.load_all());
  out += ",\"memory\":" + json_load(tf::load(tf::Source::memory(read_file(path), path.filename().string())));
  out += "},\"entries\":[";
  bool first = true;
  for (const tf::CheckpointEntry& entry : heap.entries()) {
    out += std::string(first ? "" : ",") + "[" + json_string(entry.path) + "," +
           std::to_string(static_cast<std::uint32_t>(entry.ggml_type.value())) + "," + json_shape(entry.shape) + "," +
           std::to_string(entry.nbytes) + "," + std::to_string(entry.location.value().offset) + "]";
    first = false;
  }
  out += "],\"dequantized\":{";
  const tf::Value loaded = heap.load_all();
  first = true;
  for (const tf::CheckpointEntry& entry : heap.entries()) {
    if (!tf::can_dequantize(*entry.ggml_type)) continue;
    const tf::Tensor floats = tf::dequantize(loaded, entry.path);
    out += std::string(first ? "" : ",") + json_string(entry.path) + ":" + hex(floats.raw_data(), floats.nbytes());
    first = false;
  }
  std::cout << out << "}}\n";
  return 0;
}

int dequantize(std::uint32_t id, const std::filesystem::path& in, const std::filesystem::path& out) {
  const tf::GgmlTypeInfo& info = tf::ggml_type_info(id);
  if (!tf::can_dequantize(info.type)) {
    std::cout << "{\"supported\":false}\n";
    return 0;
  }
  const std::vector<std::byte> blocks = read_file(in);
  std::vector<float> floats(blocks.size() / info.block_bytes * info.block_size);
  tf::dequantize(info.type, blocks, floats);
  write_file(out, floats.data(), floats.size() * sizeof(float));
  std::cout << "{\"supported\":true}\n";
  return 0;
}

int quantize(std::uint32_t id, const std::filesystem::path& in, const std::filesystem::path& out) {
  const tf::GgmlTypeInfo& info = tf::ggml_type_info(id);
  if (!tf::can_quantize(info.type)) {
    std::cout << "{\"supported\":false}\n";
    return 0;
  }
  const std::vector<std::byte> bytes = read_file(in);
  std::vector<float> floats(bytes.size() / sizeof(float));
  std::memcpy(floats.data(), bytes.data(), floats.size() * sizeof(float));
  std::vector<std::byte> blocks(floats.size() / info.block_size * info.block_bytes);
  tf::quantize(info.type, floats, blocks);
  write_file(out, blocks.data(), blocks.size());
  std::cout << "{\"supported\":true}\n";
  return 0;
}

template <class T>
tf::Tensor filled(tf::DType dtype, tf::Shape shape, std::uint64_t seed) {
  std::size_t n = 1;
  for (const std::int64_t extent : shape) n *= static_cast<std::size_t>(extent);
  tf::Tensor t(tf::heap_storage(n * sizeof(T)), dtype, std::move(shape));
  auto* p = reinterpret_cast<T*>(t.mutable_raw_data());
  std::uint64_t x = seed;
  for (std::size_t i = 0; i < n; ++i) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    const auto bits = static_cast<std::uint32_t>(x >> 33);
    if constexpr (std::is_same_v<T, float>) {
      p[i] = (static_cast<float>(bits % 20001) - 10000.0f) / 997.0f;
    } else if constexpr (std::is_same_v<T, double>) {
      p[i] = (static_cast<double>(bits % 20001) - 10000.0) / 997.0;
    } else {
      p[i] = static_cast<T>(bits);  // every bit pattern (f16 and bf16 as their bits)
    }
  }
  return t;
}

tf::Value int_list(std::initializer_list<std::int64_t> values) {
  std::vector<tf::Value> items;
  for (const std::int64_t v : values) items.emplace_back(v);
  return tf::Value(tf::List(std::move(items)));
}

tf::Value float_list(std::initializer_list<double> values) {
  std::vector<tf::Value> items;
  for (const double v : values) items.emplace_back(v);
  return tf::Value(tf::List(std::move(items)));
}

// Metadata of all 12 scalar types at their edges and an array of each (an empty one too), with the types to write.
void every_metadata_type(tf::Dict& metadata, tf::Dict& types) {
  const auto put = [&](const char* key, tf::Value value, const char* type) {
    metadata.set(key, std::move(value));
    types.set(key, tf::Value(type));
  };
  tf::BigInt u64_max;
  for (int i = 0; i < 8; ++i) u64_max.bytes.push_back(0xFF);
  u64_max.bytes.push_back(0);
  put("general.architecture", tf::Value("llama"), "string");
  put("t.u8", tf::Value(std::int64_t{255}), "uint8");
  put("t.i8", tf::Value(std::int64_t{-128}), "int8");
  put("t.u16", tf::Value(std::int64_t{65535}), "uint16");
  put("t.i16", tf::Value(std::int64_t{-32768}), "int16");
  put("t.u32", tf::Value(std::int64_t{4294967295}), "uint32");
  put("t.i32", tf::Value(std::int64_t{std::numeric_limits<std::int32_t>::min()}), "int32");
  put("t.f32", tf::Value(-1.0e-40), "float32");  // a float32 subnormal
  put("t.bool", tf::Value(true), "bool");
  put("t.str", tf::Value("h\xC3\xA9llo \"w\"\n\t"), "string");
  put("t.empty_str", tf::Value(""), "string");
  put("t.u64", tf::Value(std::move(u64_max)), "uint64");
  put("t.i64", tf::Value(std::numeric_limits<std::int64_t>::min()), "int64");
  put("t.f64", tf::Value(-0.0), "float64");
  put("a.u8", int_list({0, 1, 255}), "array[uint8]");
  put("a.i8", int_list({-128, 0, 127}), "array[int8]");
  put("a.u16", int_list({0, 65535}), "array[uint16]");
  put("a.i16", int_list({-32768, 32767}), "array[int16]");
  put("a.u32", int_list({0, 4294967295}), "array[uint32]");
  put("a.i32", int_list({-2147483648, 2147483647, 7}), "array[int32]");
  put("a.f32", float_list({1.5, -2.25, 3.0e38}), "array[float32]");
  std::vector<tf::Value> bools{tf::Value(true), tf::Value(false), tf::Value(true)};
  put("a.bool", tf::Value(tf::List(std::move(bools))), "array[bool]");
  std::vector<tf::Value> strings{tf::Value("<s>"), tf::Value(""), tf::Value("\xE2\x96\x81the")};
  put("a.str", tf::Value(tf::List(std::move(strings))), "array[string]");
  put("a.u64", int_list({0, std::numeric_limits<std::int64_t>::max()}), "array[uint64]");
  put("a.i64", int_list({std::numeric_limits<std::int64_t>::min(), -1}), "array[int64]");
  put("a.f64", float_list({0.1, -1.0e308, 5e-324}), "array[float64]");
  put("a.empty", tf::Value(tf::List()), "array[int32]");
}

// Tensors of every plain type save_gguf writes, and float ones that `.gguf.quantize` turns into blocks.
tf::NamedTensors every_tensor_type() {
  return {
      {"token_embd.weight", filled<float>(tf::DType::Float32, {4, 64}, 1)},  // quantized, when asked
      {"blk.0.attn_q.weight", filled<float>(tf::DType::Float32, {2, 3, 32}, 2)},
      {"blk.0.attn_norm.weight", filled<float>(tf::DType::Float32, {64}, 3)},  // 1-d: never quantized
      {"odd_rows", filled<float>(tf::DType::Float32, {2, 40}, 4)},             // rows of 40: not whole blocks
      {"h.f16", filled<std::uint16_t>(tf::DType::Float16, {3, 5}, 5)},
      {"h.bf16", filled<std::uint16_t>(tf::DType::BFloat16, {7}, 6)},
      {"h.f64", filled<double>(tf::DType::Float64, {2, 2}, 7)},
      {"h.i8", filled<std::int8_t>(tf::DType::Int8, {9}, 8)},
      {"h.i16", filled<std::int16_t>(tf::DType::Int16, {1, 3}, 9)},
      {"h.i32", filled<std::int32_t>(tf::DType::Int32, {2, 1, 2, 2}, 10)},
      {"h.i64", filled<std::int64_t>(tf::DType::Int64, {3}, 11)},
  };
}

// Writes DIR/<quantize>_<alignment>.gguf files and a GGUF load written back at another alignment; prints what each
// was given: metadata with types, and every tensor's name, dtype's ggml type, torch shape and bytes.
int save(const std::filesystem::path& dir) {
  struct Case {
    std::string quantize;
    std::uint64_t alignment;
  };
  const Case cases[] = {{"", 32}, {"q8_0", 64}, {"q4_0", 8}, {"q8_0", 1}, {"", 4096}};
  const tf::NamedTensors tensors = every_tensor_type();
  std::string out = "{\"files\":[";
  bool first_file = true;
  for (const Case& c : cases) {
    tf::Dict metadata;
    tf::Dict types;
    every_metadata_type(metadata, types);
    const tf::Value metadata_value(metadata);
    const tf::Value types_value(types);
    const std::filesystem::path path =
        dir / ((c.quantize.empty() ? std::string("plain") : c.quantize) + "_" + std::to_string(c.alignment) + ".gguf");
    tf::save_gguf(tensors, path,
                  {.gguf = {.alignment = c.alignment,
                            .metadata = metadata_value,
                            .metadata_types = types_value,
                            .quantize = c.quantize}});
    out += std::string(first_file ? "" : ",") + "{\"path\":" + json_string(path.string()) +
           ",\"alignment\":" + std::to_string(c.alignment) + ",\"quantize\":" + json_string(c.quantize) +
           ",\"metadata\":" + json_metadata(metadata_value, types_value) + ",\"tensors\":[";
    first_file = false;
    bool first = true;
    for (const auto& [name, tensor] : tensors) {
      std::uint32_t id = 0;
      for (const tf::GgmlTypeInfo& info : tf::ggml_types()) {
        if (info.dtype == tensor.dtype()) id = static_cast<std::uint32_t>(info.type);
      }
      out += std::string(first ? "" : ",") + "[" + json_string(name) + "," + std::to_string(id) + "," +
             json_shape(tensor.sizes()) + "," + hex(tensor.raw_data(), tensor.nbytes()) + "]";
      first = false;
    }
    out += "]}";
  }
  // A GGUF load of the q8_0 file written back at alignment 256: its blocks as read, its metadata as stored.
  const std::filesystem::path again = dir / "rewritten_256.gguf";
  tf::save_gguf(tf::load(dir / "q8_0_64.gguf"), again, {.gguf = {.alignment = 256}});
  // An array of arrays, which GGUF allows and gguf-py writes, but ggml reads no such key (nor writes one).
  tf::Dict nested_metadata;
  tf::Dict nested_types;
  std::vector<tf::Value> rows{int_list({1, 2}), int_list({3})};
  nested_metadata.set("a.nested", tf::Value(tf::List(std::move(rows))));
  nested_types.set("a.nested", tf::Value("array[array[int32]]"));
  const std::filesystem::path nested = dir / "nested.gguf";
  tf::save_gguf(tensors, nested,
                {.gguf = {.metadata = tf::Value(std::move(nested_metadata)),
                          .metadata_types = tf::Value(std::move(nested_types))}});
  // A split model of four tensors a part (llama.cpp's gguf-split --split-max-tensors 4), the metadata in the first.
  tf::Dict split_metadata;
  split_metadata.set("general.architecture", tf::Value("llama"));
  const std::filesystem::path split = dir / "split.gguf";
  tf::save_gguf(tensors, split, {.gguf = {.metadata = tf::Value(std::move(split_metadata)), .split_max_tensors = 4}});
  std::string parts;
  for (std::uint32_t k = 0; k < 3; ++k) {
    parts += std::string(k == 0 ? "" : ",") + json_string(tf::gguf_split_file_name((dir / "split").string(), k, 3));
  }
  std::cout << out << "],\"rewritten\":" << json_string(again.string())
            << ",\"nested\":" << json_string(nested.string())
            << ",\"split\":{\"prefix\":" << json_string((dir / "split").string()) << ",\"parts\":[" << parts << "]}}\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) try {
  const std::vector<std::string> args(argv + 1, argv + argc);
  if (args.size() == 2 && args[0] == "dump") return dump(args[1]);
  if (args.size() == 4 && args[0] == "dequantize") {
    return dequantize(static_cast<std::uint32_t>(std::stoul(args[1])), args[2], args[3]);
  }
  if (args.size() == 4 && args[0] == "quantize") {
    return quantize(static_cast<std::uint32_t>(std::stoul(args[1])), args[2], args[3]);
  }
  if (args.size() == 2 && args[0] == "save") return save(args[1]);
  std::cerr << "usage: ggml_peer_probe dump FILE | dequantize TYPE_ID IN OUT | quantize TYPE_ID IN OUT | save DIR\n";
  return 2;
} catch (const std::exception& e) {
  std::cerr << "ggml_peer_probe: " << e.what() << "\n";
  return 1;
}
