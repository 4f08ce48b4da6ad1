// SPDX-License-Identifier: MIT
// TorchHooks, torch's side of the pickle machine: the allowed globals, the tensor rebuild functions
// and storage ids (the machine itself is pickle_machine.hpp).
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "tensorfile/core/detail/tensor_arena.hpp"
#include "tensorfile/core/error.hpp"
#include "tensorfile/core/heap_backend.hpp"
#include "tensorfile/core/value.hpp"
#include "tensorfile/detail/bytes/checked_math.hpp"
#include "tensorfile/detail/bytes/keyed_hash.hpp"
#include "tensorfile/formats/options.hpp"
#include "tensorfile/formats/torch/detail/storage_types.hpp"
#include "tensorfile/formats/torch/detail/tensor_call_matcher.hpp"

namespace tensorfile::detail {

/// Globals a torch file may name that tensorfile understands (plus every dtype and storage class).
inline bool is_known_global(std::string_view module, std::string_view name) {
  static const std::unordered_map<std::string_view, std::vector<std::string_view>> known{
      {"torch._utils",
       {"_rebuild_tensor", "_rebuild_tensor_v2", "_rebuild_tensor_v3", "_rebuild_parameter",
        "_rebuild_parameter_with_state", "_rebuild_meta_tensor_no_storage", "_rebuild_qtensor",
        "_rebuild_sparse_tensor", "_rebuild_sparse_csr_tensor", "_rebuild_nested_tensor", "_rebuild_wrapper_subclass",
        "_rebuild_device_tensor_from_cpu_tensor", "_rebuild_device_tensor_from_numpy", "_rebuild_xla_tensor"}},
      {"torch._tensor", {"_rebuild_from_type_v2", "_rebuild_from_type"}},
      {"collections", {"OrderedDict"}},
      {"torch",
       {"Size", "device", "Tensor", "per_tensor_affine", "per_tensor_symmetric", "per_channel_affine",
        "per_channel_symmetric", "per_channel_affine_float_qparams"}},
      {"torch.nn.parameter", {"Parameter"}},
      {"torch.serialization", {"_get_layout"}},
      {"builtins", {"set", "frozenset", "complex", "bytearray", "bytes"}},
      {"_codecs", {"encode"}},
  };
  auto it = known.find(module);
  if (it == known.end()) return false;
  for (auto candidate : it->second) {
    if (candidate == name) return true;
  }
  return false;
}

/// The number a storage key spells when it is a plain decimal ("0", "17"; not "017" or "-1"), as
/// torch's keys are; lets lookups index vectors instead of hashing strings.
inline std::optional<std::size_t> decimal_key(std::string_view key) noexcept {
  if (key.empty() || key.size() > 9 || (key.size() > 1 && key[0] == '0')) return std::nullopt;
  std::size_t n = 0;
  for (const char c : key) {
    if (c < '0' || c > '9') return std::nullopt;
    n = n * 10 + static_cast<std::size_t>(c - '0');
  }
  return n;
}

/// Rebuild functions whose tensors tensorfile does not model: strict loads refuse them by name.
inline bool is_unsupported_rebuild(std::string_view name) {
  return name == "_rebuild_qtensor" || name == "_rebuild_sparse_tensor" || name == "_rebuild_sparse_csr_tensor" ||
         name == "_rebuild_nested_tensor" || name == "_rebuild_wrapper_subclass" ||
         name == "_rebuild_device_tensor_from_cpu_tensor" || name == "_rebuild_device_tensor_from_numpy" ||
         name == "_rebuild_xla_tensor" || name == "_rebuild_from_type";
}

/// Negates values (neg) or imaginary parts (conj) of a contiguous host tensor in place.
inline void negate_in_place(Tensor& t, bool imaginary_only) {
  std::byte* p = t.mutable_raw_data();
  const auto n = static_cast<std::size_t>(t.numel()) * (is_complex(t.dtype()) ? 2 : 1);
  const std::size_t width = element_size(t.dtype()) / (is_complex(t.dtype()) ? 2 : 1);
  for (std::size_t i = 0; i < n; ++i) {
    if (imaginary_only && i % 2 == 0) continue;
    // Every supported float format keeps its sign in the top bit of the last (little-endian) byte.
    p[i * width + width - 1] ^= std::byte{0x80};
  }
}

/// The hooks the pickle machine calls while reading a torch pickle. Storage bytes come from
/// `load_storage` (zip records or the legacy data area), already mapped to their device.
class TorchHooks {
 public:
  /// Produces the storage for a persistent id: key, dtype, element count, saved location tag.
  using LoadStorage = std::function<Storage(const std::string& key, DType dtype, std::int64_t numel,
                                            const std::string& location, std::uint64_t at)>;

  TorchHooks(const LoadOptions& options, ErrorLocation where, LoadStorage load_storage)
      : options_(options), where_(std::move(where)), load_storage_(std::move(load_storage)) {}

  /// Called before the hooks read storage bytes themselves (materializing conj/neg views), so that a
  /// loader that defers its reads until the pickle is done can complete them first.
  void before_reading_storages(std::function<void()> complete_reads) { complete_reads_ = std::move(complete_reads); }
  /// Makes room for `count` numbered storages (a zip file's record count: bounded by the file, unlike a key).
  void expect_storages(std::size_t count) { numbered_storages_.reserve(count); }
  /// Boxes the tensors whose storage shares `block`'s owner (the load's one heap arena, or its mapping) together
  /// in a TensorArena: they keep that block alive anyway, so the shared boxes keep nothing longer.
  void box_together_with(Storage block) { shared_block_ = std::move(block); }
  /// Lets go of the storage keys seen so far (once the pickle has run: the loaded values hold what they use).
  void forget_storages() noexcept {
    numbered_storages_ = std::vector<StorageSlot>();
    storages_ = decltype(storages_)();
    storage_values_ = decltype(storage_values_)();
  }

  Value find_class(std::string_view module, std::string_view name, std::uint64_t at) {
    if (module == "__builtin__") module = "builtins";  // protocol 2 spelling
    if (module == "torch") {
      if (auto dtype = try_parse_dtype(name)) return Value(*dtype);
    }
    if (module.starts_with("torch") && name.ends_with("Storage") && storage_type_dtype(name)) {
      return Value(Global{"torch", std::string(name)});
    }
    if (is_known_global(module, name) || !options_.strict) return Value(Global{std::string(module), std::string(name)});
    throw UnsupportedError("global " + std::string(module) + "." + std::string(name) +
                               " is not allowed; only tensors, containers and plain values load in strict mode "
                               "(set .strict = false to keep it as an opaque object)",
                           at_(at));
  }

  Value reduce(const Value& callable, Value args, std::uint64_t at) {
    if (!callable.is_global()) {
      throw FormatError("REDUCE calls a " + std::string(Value::kind_name(callable.kind())) + "; expected a global",
                        at_(at));
    }
    const Global& g = callable.as_global();
    const List& a = args.as_tuple();
    if (g.module == "torch._utils") {
      if (g.name == "_rebuild_tensor_v2") return rebuild_tensor(a, 6, false, at);
      if (g.name == "_rebuild_tensor_v3") return rebuild_tensor(a, 7, true, at);
      if (g.name == "_rebuild_tensor") return rebuild_tensor(a, 4, false, at);
      if (g.name == "_rebuild_parameter" || g.name == "_rebuild_parameter_with_state") {
        const std::string function = "torch._utils." + g.name;
        need(a, g.name == "_rebuild_parameter" ? 3 : 4, function, at);
        Tensor data = tensor_arg(a[0], function, at);
        data.set_requires_grad(bool_arg(a[1], function, at));
        return Value::parameter(std::move(data));
      }
      if (g.name == "_rebuild_meta_tensor_no_storage") return rebuild_meta(a, at);
    }
    if (g.module == "torch._tensor" && g.name == "_rebuild_from_type_v2") return rebuild_from_type(a, at);
    if (g.module == "collections" && g.name == "OrderedDict") {  // every tensor's empty backward_hooks: keep it cheap
      Dict dict;
      dict.ordered = true;
      if (!a.empty()) fill_pairs(dict, a[0], "collections.OrderedDict", at);
      return Value(std::move(dict));
    }
    const std::string full = g.module + "." + g.name;
    if (is_unsupported_rebuild(g.name) && (g.module == "torch._utils" || g.module == "torch._tensor")) {
      if (options_.strict) {
        throw UnsupportedError(describe_unsupported(g.name) + " (" + g.module + "." + g.name + ") are not supported",
                               at_(at));
      }
      return Value(Object{g.module, g.name, std::move(args), Value(), false});
    }
    if (full == "torch.Size") {
      need(a, 1, full, at);
      if (!a[0].is_tuple()) bad_arg(full, "a tuple", a[0], at);
      return a[0];
    }
    if (full == "torch.device") return make_device(a, at);
    if (full == "builtins.set" || full == "builtins.frozenset") {
      Set set;
      set.frozen = g.name == "frozenset";
      if (!a.empty()) set.items = a[0].elements();
      return Value(std::move(set));
    }
    if (full == "builtins.complex") {
      need(a, 2, full, at);
      return Value(std::complex<double>(number_arg(a[0], full, at), number_arg(a[1], full, at)));
    }
    if (full == "_codecs.encode" || full == "builtins.bytearray" || full == "builtins.bytes")
      return make_bytes(a, full, at);
    if (full == "torch.serialization._get_layout") {
      need(a, 1, full, at);
      const std::string& text = string_arg(a[0], full, at);
      return Value(Global{"torch", text.starts_with("torch.") ? text.substr(6) : text});
    }
    if (options_.strict) throw UnsupportedError("calling " + full + " is not supported", at_(at));
    return Value(Object{g.module, g.name, std::move(args), Value(), false});
  }

  Value new_object(const Value& cls, Value args, std::uint64_t at) {
    if (!cls.is_global()) {
      throw FormatError("NEWOBJ on a " + std::string(Value::kind_name(cls.kind())) + "; expected a class", at_(at));
    }
    const Global& g = cls.as_global();
    if (g.module == "collections" && g.name == "OrderedDict") {
      Dict dict;
      dict.ordered = true;
      return Value(std::move(dict));
    }
    if (g.module == "torch.nn.parameter" && g.name == "Parameter") {
      const List& a = args.as_tuple();
      if (a.empty()) throw FormatError("Parameter needs its data", at_(at));
      Tensor data = tensor_arg(a[0], "Parameter", at);
      data.set_requires_grad(a.size() < 2 || bool_arg(a[1], "Parameter", at));
      return Value::parameter(std::move(data));
    }
    if (options_.strict)
      throw UnsupportedError("creating " + g.module + "." + g.name + " objects is not supported", at_(at));
    return Value(Object{g.module, g.name, std::move(args), Value(), true});
  }

  Value build(const Value& object, Value state, std::uint64_t at) {
    if (object.is_dict()) {  // an OrderedDict with attributes: a state_dict's _metadata
      Value attributes = state.is_tuple() && !state.as_tuple().empty() ? state.as_tuple()[0] : state;
      if (attributes.is_none()) return object;
      if (!attributes.is_dict()) bad_arg("BUILD of a dict", "a dict of attributes", attributes, at);
      // The loader's unchecked access: attributes read from the pickle are sealed, so they cannot hold `object`.
      Value& own = ValueAccess::attributes(ValueAccess::dict(object));
      if (!own.is_dict()) own = Value(Dict{});
      for (const auto& [k, v] : attributes.as_dict()) ValueAccess::set(ValueAccess::dict(own), k, v);
      return object;
    }
    if (object.is_object()) {
      ValueAccess::object(object).state = std::move(state);
      return object;
    }
    if (object.is_tensor() && !options_.strict) return object;  // tensor attributes: dropped
    throw FormatError("BUILD on a " + std::string(Value::kind_name(object.kind())) + "; expected a dict or an object",
                      at_(at));
  }

  Value persistent_load(Value pid, std::uint64_t at) {
    if (!pid.is_tuple()) {
      throw FormatError("persistent id is a " + std::string(Value::kind_name(pid.kind())) + "; expected a tuple",
                        at_(at));
    }
    const List& p = pid.as_tuple();
    if (p.empty() || !p[0].is_string() || p[0].as_string() != "storage") {
      if (!p.empty() && p[0].is_string() && p[0].as_string() == "module" && !options_.strict) return Value();
      throw FormatError("persistent id is not a ('storage', ...) tuple", at_(at));
    }
    if (p.size() != 5 && p.size() != 6) {
      throw FormatError("storage id has " + std::to_string(p.size()) + " fields; expected 5 or 6", at_(at));
    }
    if (!p[1].is_global()) bad_arg("storage id", "a storage class", p[1], at);
    const auto dtype = storage_type_dtype(p[1].as_global().name);
    if (!dtype) throw FormatError("unknown storage class " + p[1].as_global().name, at_(at));
    if (!p[2].is_string()) bad_arg("storage id", "a string key", p[2], at);
    if (!p[3].is_string()) bad_arg("storage id", "a location string", p[3], at);
    if (!p[4].is_int() || p[4].as_int() < 0) bad_arg("storage id", "a non-negative element count", p[4], at);
    const std::string& key = p[2].as_string();
    const Value& storage = storage_value(key, storage_for(key, *dtype, p[3].as_string(), p[4].as_int(), at));
    if (p.size() == 6 && !p[5].is_none()) return legacy_view(storage.as_storage(), p[5], at);
    return storage;
  }

  /// Call recognition (see PickleMachine): a `_rebuild_tensor_v2/v3` call written the way Python's
  /// pickler writes a fresh tensor is read in one go, without its intermediate tuples.
  using RecognizedCall = TensorRecord;
  template <class Memo>
  std::optional<TensorRecord> recognize_call(const Value& callable, std::span<const std::byte> bytes, std::size_t pos,
                                             std::uint64_t base, const Memo& memo) const {
    const Global& g = callable.as_global();
    const std::string_view name = g.name;  // compared as views: inlined, no strlen per call
    if (std::string_view(g.module) != "torch._utils") return std::nullopt;
    const bool v3 = name == "_rebuild_tensor_v3";
    if (!v3 && name != "_rebuild_tensor_v2") return std::nullopt;
    return match_tensor_record(bytes, pos, base, v3, memo);
  }
  /// Builds what the recognized call returns; errors name the same opcodes the general path would.
  Value finish_call(TensorRecord& r) {
    const StorageSlot& storage = storage_for(r.key, r.storage_dtype, r.location, r.numel, r.storage_at);
    return tensor_value(make_tensor(storage.storage, r.dtype.value_or(storage.dtype), r.offset, std::move(r.sizes),
                                    std::move(r.strides), r.requires_grad,
                                    r.dtype ? "_rebuild_tensor_v3" : "_rebuild_tensor_v2", r.call_at));
  }

 private:
  ErrorLocation at_(std::uint64_t offset) const {
    ErrorLocation where = where_;
    where.offset = offset;
    return where;
  }
  [[noreturn]] void bad_arg(std::string_view function, std::string_view expected, const Value& got,
                            std::uint64_t at) const {
    throw FormatError(std::string(function) + " argument is a " + std::string(Value::kind_name(got.kind())) +
                          "; expected " + std::string(expected),
                      at_(at));
  }
  void need(const List& a, std::size_t count, std::string_view function, std::uint64_t at) const {
    if (a.size() < count) {
      throw FormatError(
          std::string(function) + " has " + std::to_string(a.size()) + " arguments; expected " + std::to_string(count),
          at_(at));
    }
  }
  Tensor tensor_arg(const Value& v, std::string_view function, std::uint64_t at) const {
    if (!v.is_tensor()) bad_arg(function, "a tensor", v, at);
    return v.as_tensor();
  }
  bool bool_arg(const Value& v, std::string_view function, std::uint64_t at) const {
    if (v.is_bool()) return v.as_bool();
    if (v.is_int()) return v.as_int() != 0;
    bad_arg(function, "a bool", v, at);
  }
  double number_arg(const Value& v, std::string_view function, std::uint64_t at) const {
    if (v.is_float() || v.is_int()) return v.as_float();
    bad_arg(function, "a number", v, at);
  }
  const std::string& string_arg(const Value& v, std::string_view function, std::uint64_t at) const {
    if (!v.is_string()) bad_arg(function, "a string", v, at);
    return v.as_string();
  }
  Shape shape_arg(const Value& v, std::string_view function, std::uint64_t at) const {
    if (!v.is_tuple() && !v.is_list()) bad_arg(function, "a tuple of ints", v, at);
    Shape out;
    out.reserve(v.elements().size());
    for (const auto& item : v.elements()) {
      if (!item.is_int()) bad_arg(function, "a tuple of ints", item, at);
      out.push_back(item.as_int());
    }
    return out;
  }

  Value tensor_value(Tensor&& t) {
    if (!shared_block_.defined() || !t.storage().shares_owner_with(shared_block_)) return Value(std::move(t));
    if (!tensor_arena_) tensor_arena_ = std::make_shared<TensorArena>();
    return TensorArena::make(tensor_arena_, std::move(t));
  }

  // One storage key of the file: its bytes, and its Value once a general path asks for one. Recognized
  // tensor calls take the bytes alone, so a file of plain tensors builds no 1-d tensor or box per storage.
  // Kept small (a file may hold millions of storages): the location tag is an index into locations_, and the
  // few storages a general path asks for as Values have them in storage_values_.
  struct StorageSlot {
    bool loaded = false;
    DType dtype = DType::UInt8;
    std::uint32_t location = 0;
    Storage storage;  // numel * element_size(dtype) bytes: load_storage_ checks the record's size
  };

  // One slot per storage key, so that views share it. The reference lasts until the next call.
  StorageSlot& storage_for(std::string_view key, DType dtype, std::string_view location, std::int64_t numel,
                           std::uint64_t at) {
    StorageSlot& slot = storage_slot(key);
    if (!slot.loaded) {
      const std::string name(key);
      std::string tag(location);
      slot.storage = load_storage_(name, dtype, numel, tag, at);
      slot.dtype = dtype;
      slot.location = location_index(std::move(tag));
      slot.loaded = true;
      ++storage_count_;
      return slot;
    }
    if (slot.dtype != dtype) {
      throw FormatError("storage " + std::string(key) + " is used as " + std::string(dtype_name(slot.dtype)) +
                            " and as " + std::string(dtype_name(dtype)) + "; expected one dtype per storage",
                        at_(at));
    }
    return slot;
  }
  // The storage as a Value (a 1-d tensor of all its elements), made once so that every use shares it.
  const Value& storage_value(const std::string& key, const StorageSlot& slot) {
    const auto [it, added] = storage_values_.try_emplace(key);
    if (added) {
      const auto numel = static_cast<std::int64_t>(slot.storage.size_bytes() / element_size(slot.dtype));
      it->second = Value(StorageValue{Tensor(slot.storage, slot.dtype, {numel}), locations_[slot.location]});
    }
    return it->second;
  }
  // The index of `tag` in locations_, added when new; files name one or a few tags, the last one nearly always.
  std::uint32_t location_index(std::string tag) {
    if (!locations_.empty() && locations_[last_location_] == tag) return last_location_;
    const auto found = std::find(locations_.begin(), locations_.end(), tag);
    if (found == locations_.end()) {
      if (locations_.size() >= UINT32_MAX) throw LimitError("too many storage location tags", where_);
      locations_.push_back(std::move(tag));
      last_location_ = static_cast<std::uint32_t>(locations_.size() - 1);
    } else {
      last_location_ = static_cast<std::uint32_t>(found - locations_.begin());
    }
    return last_location_;
  }
  // Decimal keys below twice the storages seen so far index a vector (it grows with what the file
  // holds, never with what a key claims); any other key goes to a map. A decimal key first seen
  // out of the vector's reach stays in the map, so the map is asked first whenever it holds any.
  StorageSlot& storage_slot(std::string_view key) {
    if (!storages_.empty()) {
      if (auto it = storages_.find(std::string(key)); it != storages_.end()) return it->second;
    }
    if (const auto n = decimal_key(key); n && *n < 2 * storage_count_ + 64) {
      if (*n >= numbered_storages_.size()) numbered_storages_.resize(*n + 1);
      return numbered_storages_[*n];
    }
    return storages_[std::string(key)];
  }

  Tensor make_tensor(const Storage& storage, DType dtype, std::int64_t offset, Shape sizes, Shape strides,
                     bool requires_grad, std::string_view function, std::uint64_t at) const {
    try {
      return Tensor(storage, dtype, std::move(sizes), std::move(strides), offset, requires_grad);
    } catch (const ArgumentError& error) {
      throw FormatError(std::string(function) + ": " + error.reason(), at_(at));
    }
  }

  Value rebuild_tensor(const List& a, std::size_t fixed, bool v3, std::uint64_t at) {
    const char* function = v3 ? "_rebuild_tensor_v3" : fixed == 4 ? "_rebuild_tensor" : "_rebuild_tensor_v2";
    need(a, fixed, function, at);
    if (!a[0].is_storage()) bad_arg(function, "a storage", a[0], at);
    const StorageValue& storage = a[0].as_storage();
    DType dtype = storage.tensor.dtype();
    if (v3) {
      if (!a[6].is_dtype()) bad_arg(function, "a dtype", a[6], at);
      dtype = a[6].as_dtype();
    }
    if (!a[1].is_int()) bad_arg(function, "an int offset", a[1], at);
    Shape sizes = shape_arg(a[2], function, at);
    Shape strides = shape_arg(a[3], function, at);
    const bool requires_grad = fixed > 4 && bool_arg(a[4], function, at);
    Tensor t = make_tensor(storage.tensor.storage(), dtype, a[1].as_int(), std::move(sizes), std::move(strides),
                           requires_grad, function, at);
    const std::size_t metadata_at = fixed;
    if (a.size() > metadata_at && a[metadata_at].is_dict()) apply_metadata(t, a[metadata_at].as_dict(), at);
    return tensor_value(std::move(t));
  }

  // torch 2.x records lazy conj/neg views as {'conj': True} / {'neg': True}; tensorfile materializes them.
  void apply_metadata(Tensor& t, const Dict& metadata, std::uint64_t at) const {
    const Value* conj = metadata.find(std::string_view("conj"));
    const Value* neg = metadata.find(std::string_view("neg"));
    const bool do_conj = conj != nullptr && conj->is_bool() && conj->as_bool() && is_complex(t.dtype());
    const bool do_neg = neg != nullptr && neg->is_bool() && neg->as_bool();
    if (!do_conj && !do_neg) return;
    if (!t.device().is_cpu()) return;  // meta: nothing to negate
    if (do_neg && !is_floating_point(t.dtype()) && !is_complex(t.dtype())) {
      throw UnsupportedError("neg view of a " + std::string(dtype_name(t.dtype())) + " tensor is not supported",
                             at_(at));
    }
    if (complete_reads_) complete_reads_();
    const bool grad = t.requires_grad();
    t = t.clone();
    t.set_requires_grad(grad);
    if (do_neg) negate_in_place(t, false);
    if (do_conj) negate_in_place(t, true);
  }

  Value rebuild_meta(const List& a, std::uint64_t at) {
    constexpr std::string_view function = "_rebuild_meta_tensor_no_storage";
    need(a, 4, function, at);
    if (!a[0].is_dtype()) bad_arg(function, "a dtype", a[0], at);
    Shape sizes = shape_arg(a[1], function, at);
    Shape strides = shape_arg(a[2], function, at);
    try {
      // The meta storage claims what the view needs; it holds no bytes, so nothing is allocated.
      std::int64_t extent = 1;
      for (std::size_t d = 0; d < sizes.size(); ++d) {
        if (sizes[d] == 0) {
          extent = 0;
          break;
        }
        const auto reach = checked_mul(sizes[d] - 1, strides[d]);
        const auto sum = reach ? checked_add(extent, *reach) : std::nullopt;
        if (!sum) throw ArgumentError("view extent overflows int64");
        extent = *sum;
      }
      const auto bytes = checked_mul(extent, static_cast<std::int64_t>(element_size(a[0].as_dtype())));
      if (!bytes) throw ArgumentError("view extent overflows int64");
      Tensor t(meta_storage(static_cast<std::size_t>(*bytes)), a[0].as_dtype(), std::move(sizes), std::move(strides), 0,
               bool_arg(a[3], function, at));
      return Value(std::move(t));
    } catch (const ArgumentError& error) {
      throw FormatError(std::string(function) + ": " + error.reason(), at_(at));
    }
  }

  Value rebuild_from_type(const List& a, std::uint64_t at) {
    constexpr std::string_view function = "_rebuild_from_type_v2";
    need(a, 4, function, at);
    if (!a[2].is_tuple()) bad_arg(function, "an argument tuple", a[2], at);
    Value inner = reduce(a[0], a[2], at);
    if (!a[1].is_global()) bad_arg(function, "a class", a[1], at);
    const Global& type = a[1].as_global();
    if (type.module == "torch" && type.name == "Tensor") return inner;
    if (type.module == "torch.nn.parameter" && type.name == "Parameter") {
      return inner.is_tensor() ? Value::parameter(inner.as_tensor()) : inner;
    }
    if (options_.strict)
      throw UnsupportedError("tensor subclass " + type.module + "." + type.name + " is not supported", at_(at));
    return Value(Object{type.module, type.name, Value::tuple({inner}), a[3], false});
  }

  Value make_device(const List& a, std::uint64_t at) {
    need(a, 1, "torch.device", at);
    std::string text = string_arg(a[0], "torch.device", at);
    if (a.size() > 1 && a[1].is_int()) text += ":" + std::to_string(a[1].as_int());
    try {
      return Value(Device::parse(text));
    } catch (const ArgumentError& error) {
      throw FormatError(error.reason(), at_(at));
    }
  }

  Value make_bytes(const List& a, std::string_view function, std::uint64_t at) {
    Bytes out;
    if (a.empty()) return Value(std::move(out));
    if (a[0].is_bytes()) return a[0];
    const std::string& text = string_arg(a[0], function, at);
    // Python wrote the bytes as a str of code points 0-255 (latin-1) in UTF-8.
    for (std::size_t i = 0; i < text.size(); ++i) {
      const auto c = static_cast<unsigned char>(text[i]);
      if (c < 0x80) {
        out.data.push_back(std::byte{c});
      } else if ((c == 0xC2 || c == 0xC3) && i + 1 < text.size()) {
        const auto next = static_cast<unsigned char>(text[++i]);
        out.data.push_back(static_cast<std::byte>(((c & 0x03u) << 6) | (next & 0x3Fu)));
      } else {
        throw FormatError(std::string(function) + " argument holds a character beyond latin-1", at_(at));
      }
    }
    return Value(std::move(out));
  }

  void fill_pairs(Dict& dict, const Value& pairs, std::string_view function, std::uint64_t at) const {
    if (!pairs.is_list() && !pairs.is_tuple()) bad_arg(function, "a list of pairs", pairs, at);
    for (const auto& pair : pairs.elements()) {
      if (!pair.is_tuple() || pair.as_tuple().size() != 2) bad_arg(function, "a (key, value) pair", pair, at);
      dict.set(pair.as_tuple()[0], pair.as_tuple()[1]);
    }
  }

  // Ancient legacy files: (view_key, offset, numel) picks a sub-range of the root storage.
  Value legacy_view(const StorageValue& root, const Value& view, std::uint64_t at) {
    if (!view.is_tuple() || view.as_tuple().size() != 3 || !view.as_tuple()[1].is_int() ||
        !view.as_tuple()[2].is_int()) {
      bad_arg("legacy storage view", "(key, offset, numel)", view, at);
    }
    const std::int64_t offset = view.as_tuple()[1].as_int();
    const std::int64_t numel = view.as_tuple()[2].as_int();
    try {
      return Value(StorageValue{root.tensor.narrow(0, offset, numel).contiguous(), root.location});
    } catch (const ArgumentError& error) {
      throw FormatError("legacy storage view: " + error.reason(), at_(at));
    }
  }

  static std::string describe_unsupported(std::string_view name) {
    if (name == "_rebuild_qtensor") return "quantized tensors";
    if (name.find("sparse") != std::string_view::npos) return "sparse tensors";
    if (name == "_rebuild_nested_tensor") return "nested tensors";
    if (name == "_rebuild_wrapper_subclass") return "wrapper subclass tensors";
    return "device tensors rebuilt from host data";
  }

  const LoadOptions& options_;
  ErrorLocation where_;
  LoadStorage load_storage_;
  std::function<void()> complete_reads_;
  std::vector<StorageSlot> numbered_storages_;
  std::unordered_map<std::string, StorageSlot, KeyedStringHash> storages_;
  std::unordered_map<std::string, Value, KeyedStringHash> storage_values_;  // by key: the storages asked for as Values
  Storage shared_block_;                                                    // see box_together_with()
  std::shared_ptr<TensorArena> tensor_arena_;  // made for the first tensor over shared_block_
  std::size_t storage_count_ = 0;
  std::vector<std::string> locations_;  // every location tag seen, by StorageSlot::location
  std::uint32_t last_location_ = 0;
};

}  // namespace tensorfile::detail
