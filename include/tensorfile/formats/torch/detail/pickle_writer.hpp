// SPDX-License-Identifier: MIT
// Writes a Value as torch.save's data.pkl: pickle protocol 2, tensors as persistent storage ids.
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tensorfile/core/error.hpp"
#include "tensorfile/core/value.hpp"
#include "tensorfile/detail/bytes/twos_complement.hpp"
#include "tensorfile/formats/torch/detail/opcodes.hpp"
#include "tensorfile/formats/torch/detail/storage_types.hpp"

namespace tensorfile::detail {

/// One distinct storage met while pickling: its key ("0", "1"...), in first-use order.
struct SavedStorage {
  Storage storage;  ///< the bytes to write as data/<key>
  DType dtype;      ///< the element type it is saved as (one per storage)
  std::string key;  ///< record name under data/
};

/// The bounds load_torch() puts on a pickle (PickleLimits), which the writer keeps so that it never
/// writes what load_torch() would refuse.
struct PickleWriteLimits {
  std::size_t max_depth = 5000;          ///< nesting of containers, counted as the loader counts it
  std::size_t max_memo = 1u << 22;       ///< memo entries
  std::size_t max_container = 1u << 26;  ///< items in one list, dict, set or tuple
};

/// Emits protocol-2 opcodes for a Value tree. Tensors that share a storage share one record;
/// a tensor or container reached twice is written once and referenced from the memo after that.
/// Throws ArgumentError, before the caller writes anything, for what load_torch() could not read back:
/// an undefined tensor, a container inside itself, a breach of `limits`.
class PickleWriter {
 public:
  explicit PickleWriter(PickleWriteLimits limits = {}) : limits_(limits) {
    limits_.max_depth = std::max<std::size_t>(limits_.max_depth, 1);  // as load(): one level is never refused
  }

  /// Pickles `root` to data.pkl bytes; storages() then lists the records to write.
  std::string dump(const Value& root) {
    out_.clear();
    op(Op::proto);
    byte(2);
    value(root, 0);
    op(Op::stop);
    if (memo_.size() > limits_.max_memo) {
      throw ArgumentError("cannot save a value that needs " + std::to_string(memo_.size()) +
                          " pickle memo entries; expected at most max_memo = " + std::to_string(limits_.max_memo) +
                          " (load_torch() refuses more)");
    }
    return std::move(out_);
  }

  /// The storages met, in first-use order.
  [[nodiscard]] const std::vector<SavedStorage>& storages() const noexcept { return storages_; }

 private:
  static constexpr std::size_t batch = 1000;  // items per APPENDS/SETITEMS, as CPython writes them

  void op(Op code) { out_.push_back(static_cast<char>(code)); }
  void byte(std::uint32_t v) { out_.push_back(static_cast<char>(v & 0xFF)); }
  void u32(std::uint32_t v) {
    for (int i = 0; i < 4; ++i) byte(v >> (8 * i));
  }

  void memo_put(const void* identity) {
    const auto index = static_cast<std::uint32_t>(memo_.size());
    memo_.emplace(identity, index);
    if (index < 256) {
      op(Op::binput);
      byte(index);
    } else {
      op(Op::long_binput);
      u32(index);
    }
  }
  bool memo_get(const void* identity) {
    auto it = memo_.find(identity);
    if (it == memo_.end()) return false;
    if (it->second < 256) {
      op(Op::binget);
      byte(it->second);
    } else {
      op(Op::long_binget);
      u32(it->second);
    }
    return true;
  }

  void global(std::string_view module, std::string_view name) {
    const std::string text = std::string(module) + "\n" + std::string(name) + "\n";
    auto it = globals_.find(text);
    if (it != globals_.end()) {
      memo_get(it->second);
      return;
    }
    op(Op::global);
    out_ += text;
    auto& slot = globals_[text];
    slot = &slot;  // a stable address stands for this global in the memo
    memo_put(&slot);
  }

  static bool is_layout(std::string_view name) {
    return name == "strided" || name == "sparse_coo" || name == "sparse_csr" || name == "sparse_csc" ||
           name == "sparse_bsr" || name == "sparse_bsc" || name == "_mkldnn" || name == "jagged";
  }

  void integer(std::int64_t v) {
    if (v >= 0 && v < 256) {
      op(Op::binint1);
      byte(static_cast<std::uint32_t>(v));
    } else if (v >= 0 && v < 65536) {
      op(Op::binint2);
      byte(static_cast<std::uint32_t>(v));
      byte(static_cast<std::uint32_t>(v >> 8));
    } else if (v >= INT32_MIN && v <= INT32_MAX) {
      op(Op::binint);
      u32(static_cast<std::uint32_t>(static_cast<std::int32_t>(v)));
    } else {
      op(Op::long1);  // the shortest two's complement
      std::vector<std::uint8_t> bytes;
      auto u = static_cast<std::uint64_t>(v);
      for (int i = 0; i < 8; ++i) bytes.push_back(static_cast<std::uint8_t>(u >> (8 * i)));
      trim_sign_bytes(bytes);
      byte(static_cast<std::uint32_t>(bytes.size()));
      for (auto b : bytes) byte(b);
    }
  }
  void big_integer(const BigInt& v) {
    if (v.bytes.size() < 256) {
      op(Op::long1);
      byte(static_cast<std::uint32_t>(v.bytes.size()));
    } else {
      op(Op::long4);
      u32(static_cast<std::uint32_t>(v.bytes.size()));
    }
    for (auto b : v.bytes) byte(b);
  }
  void floating(double v) {
    op(Op::binfloat);
    const auto bits = std::bit_cast<std::uint64_t>(v);
    for (int i = 7; i >= 0; --i) byte(static_cast<std::uint32_t>(bits >> (8 * i)));  // big-endian
  }
  void text(std::string_view s) {
    op(Op::binunicode);
    u32(static_cast<std::uint32_t>(s.size()));
    out_ += s;
  }
  // The writers of container items return the deepest item's nesting (0 for no container).
  std::size_t tuple_of(const List& items, std::size_t depth) {
    std::size_t deepest = 0;
    if (items.empty()) {
      op(Op::empty_tuple);
      return deepest;
    }
    if (items.size() <= 3) {
      for (const auto& item : items) deepest = std::max(deepest, value(item, depth + 1));
      op(tuple_op(items.size()));
      return deepest;
    }
    op(Op::mark);
    for (const auto& item : items) deepest = std::max(deepest, value(item, depth + 1));
    op(Op::tuple);
    return deepest;
  }
  std::size_t batched(const List& items, Op single, Op many, std::size_t depth) {
    std::size_t deepest = 0;
    for (std::size_t start = 0; start < items.size(); start += batch) {
      const std::size_t n = std::min(batch, items.size() - start);
      if (n == 1) {
        deepest = std::max(deepest, value(items[start], depth + 1));
        op(single);
        continue;
      }
      op(Op::mark);
      for (std::size_t i = start; i < start + n; ++i) deepest = std::max(deepest, value(items[i], depth + 1));
      op(many);
    }
    return deepest;
  }
  std::size_t dict_items(const Dict& dict, std::size_t depth) {
    std::size_t deepest = 0;
    const auto& items = dict.items();
    for (std::size_t start = 0; start < items.size(); start += batch) {
      const std::size_t n = std::min(batch, items.size() - start);
      if (n > 1) op(Op::mark);
      for (std::size_t i = start; i < start + n; ++i) {
        deepest = std::max(deepest, value(items[i].first, depth + 1));
        deepest = std::max(deepest, value(items[i].second, depth + 1));
      }
      op(n == 1 ? Op::setitem : Op::setitems);
    }
    return deepest;
  }
  void bytes_value(const Bytes& b) {
    // As CPython's protocol 2 does: _codecs.encode(<latin-1 text>, 'latin1').
    global("_codecs", "encode");
    std::string latin;
    for (auto c : b.data) {
      const auto v = std::to_integer<unsigned>(c);
      if (v < 0x80) {
        latin.push_back(static_cast<char>(v));
      } else {
        latin.push_back(static_cast<char>(0xC0 | (v >> 6)));
        latin.push_back(static_cast<char>(0x80 | (v & 0x3F)));
      }
    }
    text(latin);
    text("latin1");
    op(Op::tuple2);
    op(Op::reduce);
  }

  std::string storage_key(const Tensor& t) {
    if (!t.defined())
      throw ArgumentError("cannot save an undefined tensor (Tensor()); load_torch() could not rebuild it");
    const Storage& s = t.storage();
    // Views of one storage share its data pointer; empty storages have none, so their owner decides.
    const void* identity = s.data() != nullptr ? static_cast<const void*>(s.data()) : s.owner();
    auto [it, fresh] = storage_index_.try_emplace(StorageIdentity{identity, s.size_bytes()}, storages_.size());
    if (!fresh) {
      const SavedStorage& saved = storages_[it->second];
      if (saved.dtype != t.dtype()) {
        throw ArgumentError("cannot save tensors that view one storage as " + std::string(dtype_name(saved.dtype)) +
                            " and as " + std::string(dtype_name(t.dtype())));
      }
      return saved.key;
    }
    if (s.size_bytes() % element_size(t.dtype()) != 0) {
      throw ArgumentError("storage of " + std::to_string(s.size_bytes()) + " bytes is not a whole number of " +
                          std::string(dtype_name(t.dtype())) + " elements");
    }
    storages_.push_back(SavedStorage{s, t.dtype(), std::to_string(storages_.size())});
    return storages_.back().key;
  }

  void persistent_storage(const Tensor& t) {
    const auto legacy_name = storage_type_name(t.dtype());
    const std::string key = storage_key(t);
    const std::int64_t count = static_cast<std::int64_t>(t.storage().size_bytes()) /
                               (legacy_name ? static_cast<std::int64_t>(element_size(t.dtype())) : 1);
    op(Op::mark);
    text("storage");
    if (legacy_name) {
      global("torch", *legacy_name);
    } else {
      global("torch", "UntypedStorage");
    }
    text(key);
    text(t.device().is_cuda() ? t.device().str() : "cpu");
    integer(count);
    op(Op::tuple);
    op(Op::binpersid);
  }

  void shape(const Shape& dims) {
    List items;
    items.reserve(dims.size());
    for (auto d : dims) items.emplace_back(d);
    tuple_of(items, 0);
  }

  void tensor(const Tensor& t) {
    if (!t.defined())
      throw ArgumentError("cannot save an undefined tensor (Tensor()); load_torch() could not rebuild it");
    if (t.device().is_meta()) {
      global("torch._utils", "_rebuild_meta_tensor_no_storage");
      op(Op::mark);
      global("torch", dtype_name(t.dtype()));
      shape(t.sizes());
      shape(t.strides());
      op(t.requires_grad() ? Op::newtrue : Op::newfalse);
      op(Op::tuple);
      op(Op::reduce);
      return;
    }
    const bool classic = storage_type_name(t.dtype()).has_value();
    global("torch._utils", classic ? "_rebuild_tensor_v2" : "_rebuild_tensor_v3");
    op(Op::mark);
    persistent_storage(t);
    integer(t.storage_offset());
    shape(t.sizes());
    shape(t.strides());
    op(t.requires_grad() ? Op::newtrue : Op::newfalse);
    global("collections", "OrderedDict");
    op(Op::empty_tuple);
    op(Op::reduce);
    if (!classic) global("torch", dtype_name(t.dtype()));
    op(Op::tuple);
    op(Op::reduce);
  }

  [[noreturn]] void too_deep() const {
    throw ArgumentError(
        "cannot save a value nested more than " + std::to_string(limits_.max_depth) +
        " levels deep; raise SaveOptions::torch.max_depth and LoadOptions::limits.max_depth together to save and "
        "load it");
  }
  [[noreturn]] static void cycle(const Value& v) {
    throw ArgumentError("cannot save a " + std::string(Value::kind_name(v.kind())) +
                        " that contains itself; load_torch() refuses cycles");
  }
  // A container or call that load_torch() builds on its own (a tensor's argument tuple): only its nesting counts.
  void transient(std::size_t nesting) const {
    if (nesting > limits_.max_depth) too_deep();
  }
  void count_items(std::size_t n) const {
    if (n > limits_.max_container) {
      throw ArgumentError("cannot save a container of " + std::to_string(n) +
                          " items; expected at most max_container = " + std::to_string(limits_.max_container) +
                          " (load_torch() refuses more)");
    }
  }
  static bool is_container(Value::Kind kind) noexcept {
    return kind == Value::Kind::tuple || kind == Value::Kind::list || kind == Value::Kind::dict ||
           kind == Value::Kind::set || kind == Value::Kind::object;
  }

  // Writes `v`, which sits inside `depth` containers, and returns its nesting as load_torch() counts it:
  // 0 for a non-container, else 1 + its deepest item's. Recursion stops at max_depth (the stack
  // holds that: a test saves the default depth under ASan).
  std::size_t value(const Value& v, std::size_t depth) {
    const void* identity = v.identity();
    if (!is_container(v.kind())) {
      if (identity == nullptr || !memo_get(identity)) leaf(v, identity);
      return 0;
    }
    if (depth + 1 > limits_.max_depth) too_deep();
    if (v.is_tuple() && v.as_tuple().empty()) {  // never memoized, as Python's pickler does
      op(Op::empty_tuple);
      return 1;
    }
    auto [known, fresh] = heights_.try_emplace(identity, open_container);
    if (!fresh) {
      if (known->second == open_container) cycle(v);
      memo_get(identity);
      return known->second;
    }
    const std::size_t nesting = container(v, identity, depth);
    if (depth + nesting > limits_.max_depth) too_deep();
    heights_[identity] = nesting;  // `known` may have moved: the map grew below
    return nesting;
  }

  std::size_t container(const Value& v, const void* identity, std::size_t depth) {
    std::size_t deepest = 0;
    switch (v.kind()) {
      case Value::Kind::tuple:
        count_items(v.as_tuple().size());
        deepest = tuple_of(v.as_tuple(), depth);
        memo_put(identity);
        break;
      case Value::Kind::list:
        count_items(v.as_list().size());
        op(Op::empty_list);
        memo_put(identity);
        deepest = batched(v.as_list(), Op::append, Op::appends, depth);
        break;
      case Value::Kind::dict: {
        const Dict& dict = v.as_dict();
        count_items(dict.size());
        if (dict.ordered) {
          global("collections", "OrderedDict");
          op(Op::empty_tuple);
          op(Op::reduce);
        } else {
          op(Op::empty_dict);
        }
        memo_put(identity);
        deepest = dict_items(dict, depth);
        if (dict.ordered && dict.attributes().is_dict() && !dict.attributes().as_dict().empty()) {
          deepest = std::max(deepest, value(dict.attributes(), depth + 1));
          op(Op::build);
        }
        break;
      }
      case Value::Kind::set:
        count_items(v.as_set().items.size());
        global("builtins", v.as_set().frozen ? "frozenset" : "set");
        op(Op::empty_list);
        deepest = batched(v.as_set().items, Op::append, Op::appends, depth);
        op(Op::tuple1);
        op(Op::reduce);
        transient(deepest + 2);  // load_torch() builds the set from a tuple holding a list of the items
        memo_put(identity);
        break;
      case Value::Kind::object: {
        const Object& o = v.as_object();
        global(o.module, o.name);
        deepest = value(o.args.is_tuple() ? o.args : Value::tuple({}), depth + 1);
        op(o.newobj ? Op::newobj : Op::reduce);
        memo_put(identity);
        if (!o.state.is_none()) {
          deepest = std::max(deepest, value(o.state, depth + 1));
          op(Op::build);
        }
        break;
      }
      default: break;
    }
    return deepest + 1;
  }

  // Everything but containers: no recursion below this point, so its locals stay off the recursion's frames.
  void leaf(const Value& v, const void* identity) {
    switch (v.kind()) {
      case Value::Kind::none: op(Op::none); return;
      case Value::Kind::boolean: op(v.as_bool() ? Op::newtrue : Op::newfalse); return;
      case Value::Kind::integer: integer(v.as_int()); return;
      case Value::Kind::big_integer: big_integer(v.as_big_int()); return;
      case Value::Kind::floating: floating(v.as_float()); return;
      case Value::Kind::complex:
        transient(1);
        global("builtins", "complex");
        floating(v.as_complex().real());
        floating(v.as_complex().imag());
        op(Op::tuple2);
        op(Op::reduce);
        break;
      case Value::Kind::string: text(v.as_string()); return;
      case Value::Kind::bytes:
        transient(1);
        bytes_value(v.as_bytes());
        return;
      case Value::Kind::tensor:
        transient(2);  // the argument tuple of torch's rebuild call holds the shape tuples
        if (v.is_parameter()) {
          global("torch._utils", "_rebuild_parameter");
          tensor(v.as_tensor().requires_grad() ? Tensor(v.as_tensor()).set_requires_grad(false) : v.as_tensor());
          op(v.as_tensor().requires_grad() ? Op::newtrue : Op::newfalse);
          global("collections", "OrderedDict");
          op(Op::empty_tuple);
          op(Op::reduce);
          op(Op::tuple3);
          op(Op::reduce);
        } else {
          tensor(v.as_tensor());
        }
        break;
      case Value::Kind::storage:
        transient(1);
        persistent_storage(v.as_storage().tensor);
        return;
      case Value::Kind::device: {
        transient(1);
        global("torch", "device");
        const Device d = v.as_device();
        text(d.kind == Device::Kind::CPU ? "cpu" : d.kind == Device::Kind::CUDA ? "cuda" : "meta");
        if (d.index >= 0) {
          integer(d.index);
          op(Op::tuple2);
        } else {
          op(Op::tuple1);
        }
        op(Op::reduce);
        return;
      }
      case Value::Kind::dtype: global("torch", dtype_name(v.as_dtype())); return;
      case Value::Kind::global: {
        const Global& g = v.as_global();
        if (g.module == "torch" && is_layout(g.name)) {  // layouts travel as _get_layout('torch.<name>')
          transient(1);
          global("torch.serialization", "_get_layout");
          text("torch." + g.name);
          op(Op::tuple1);
          op(Op::reduce);
          return;
        }
        global(g.module, g.name);
        return;
      }
      default: return;
    }
    if (identity != nullptr) memo_put(identity);
  }

  static constexpr std::size_t open_container = static_cast<std::size_t>(-1);  // being written: met again, a cycle
  PickleWriteLimits limits_;
  std::unordered_map<const void*, std::size_t> heights_;  // each container's nesting, once written
  std::string out_;
  std::unordered_map<const void*, std::uint32_t> memo_;
  std::unordered_map<std::string, const void*> globals_;
  std::vector<SavedStorage> storages_;
  struct StorageIdentity {
    const void* address;
    std::size_t bytes;
    friend bool operator==(const StorageIdentity&, const StorageIdentity&) = default;
  };
  struct StorageIdentityHash {
    std::size_t operator()(const StorageIdentity& id) const noexcept {
      return std::hash<const void*>{}(id.address) ^ (id.bytes * 0x9e3779b97f4a7c15ull);
    }
  };
  std::unordered_map<StorageIdentity, std::size_t, StorageIdentityHash> storage_index_;
};

}  // namespace tensorfile::detail
