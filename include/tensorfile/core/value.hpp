// SPDX-License-Identifier: MIT
// Value: the object tree torch.load returns (None, numbers, strings, containers, tensors, ...).
#pragma once

#include <cmath>
#include <complex>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "tensorfile/core/device.hpp"
#include "tensorfile/core/dtype.hpp"
#include "tensorfile/core/error.hpp"
#include "tensorfile/core/tensor.hpp"
#include "tensorfile/detail/ordered_index.hpp"

namespace tensorfile {

class Value;

/// Python's None.
struct None {
  friend constexpr bool operator==(None, None) noexcept { return true; }
};

/// A Python int beyond 64 bits: little-endian two's-complement bytes, as pickle stores them.
struct BigInt {
  std::vector<std::uint8_t> bytes;  ///< least significant byte first; the top bit of the last byte is the sign

  /// Decimal text, e.g. "1180591620717411303424".
  [[nodiscard]] std::string str() const {
    if (bytes.empty()) return "0";
    std::vector<std::uint8_t> magnitude = bytes;
    const bool negative = (magnitude.back() & 0x80u) != 0;
    if (negative) {  // two's complement negate
      unsigned carry = 1;
      for (auto& b : magnitude) {
        const unsigned v = static_cast<unsigned>(static_cast<std::uint8_t>(~b)) + carry;
        b = static_cast<std::uint8_t>(v);
        carry = v >> 8;
      }
    }
    std::string digits;
    while (true) {  // repeated division by 10, most significant byte first
      unsigned remainder = 0;
      bool nonzero = false;
      for (std::size_t i = magnitude.size(); i-- > 0;) {
        const unsigned v = (remainder << 8) | magnitude[i];
        magnitude[i] = static_cast<std::uint8_t>(v / 10);
        remainder = v % 10;
        nonzero = nonzero || magnitude[i] != 0;
      }
      digits.insert(digits.begin(), static_cast<char>('0' + remainder));
      if (!nonzero) break;
    }
    return negative ? "-" + digits : digits;
  }
  friend bool operator==(const BigInt&, const BigInt&) = default;
};

/// Python bytes (and bytearray).
struct Bytes {
  std::vector<std::byte> data;  ///< the bytes
  friend bool operator==(const Bytes&, const Bytes&) = default;
};

/// A reference to a Python class or function that tensorfile does not model, e.g.
/// `torch.per_tensor_affine` or `numpy.dtype`. Never called.
struct Global {
  std::string module;  ///< e.g. "numpy.core.multiarray"
  std::string name;    ///< e.g. "_reconstruct"
  friend bool operator==(const Global&, const Global&) = default;
};

/// An opaque Python object (permissive loads only): how it would be built, never built.
struct Object;
/// A torch storage saved on its own (`torch.save(t.storage())`), seen as a 1-d tensor of all its elements.
struct StorageValue;
/// Python list, tuple, dict (and OrderedDict) and set (and frozenset) contents.
using List = std::vector<Value>;
class Dict;
struct Set;

namespace detail {
/// Loader bookkeeping every container carries: its nesting depth, and whether it already sits
/// inside another container (it may not change then, so recorded depths stay true and no cycle forms).
struct Nesting {
  std::uint32_t depth = 1;
  bool sealed = false;
};
/// The bookkeeping of a container value; null for other kinds.
Nesting* nesting_of(const Value& v) noexcept;
}  // namespace detail

/// One node of a loaded object tree. Value is a handle, like a Python reference: copies share
/// containers (a list reached twice is one list); clone() makes an independent deep copy.
/// Containers never hold themselves (the loader rejects cycles).
class Value {
 public:
  /// What a Value holds.
  enum class Kind : std::uint8_t {
    none,
    boolean,
    integer,
    big_integer,
    floating,
    complex,
    string,
    bytes,
    tuple,
    list,
    dict,
    set,
    tensor,
    storage,
    device,
    dtype,
    global,
    object,
  };

  Value() noexcept {}                                                                         ///< None
  Value(None) noexcept {}                                                                     ///< None
  Value(bool v) noexcept : kind_(Kind::boolean), scalar_{.boolean = v} {}                     ///< bool
  Value(int v) noexcept : kind_(Kind::integer), scalar_{.integer = v} {}                      ///< int
  Value(std::int64_t v) noexcept : kind_(Kind::integer), scalar_{.integer = v} {}             ///< int
  Value(BigInt v) : Value(Kind::big_integer, std::make_shared<BigInt>(std::move(v))) {}       ///< int beyond 64 bits
  Value(double v) noexcept : kind_(Kind::floating), scalar_{.floating = v} {}                 ///< float
  Value(std::complex<double> v) noexcept : kind_(Kind::complex), scalar_{.complex = v} {}     ///< complex
  Value(std::string v) : kind_(Kind::string), string_(std::move(v)) {}                        ///< str
  Value(const char* v) : kind_(Kind::string), string_(v) {}                                   ///< str
  Value(std::string_view v) : kind_(Kind::string), string_(v) {}                              ///< str
  Value(Bytes v) : Value(Kind::bytes, std::make_shared<Bytes>(std::move(v))) {}               ///< bytes
  Value(List v) : Value(Kind::list, std::make_shared<ListBox>(ListBox{std::move(v), {}})) {}  ///< list
  Value(Dict v);                                                                              ///< dict
  Value(Set v);                                                                               ///< set
  Value(Tensor v) : Value(Kind::tensor, std::make_shared<TensorBox>(TensorBox{std::move(v), false})) {}  ///< tensor
  Value(Device v) noexcept : kind_(Kind::device), scalar_{.device = v} {}           ///< torch.device
  Value(DType v) noexcept : kind_(Kind::dtype), scalar_{.dtype = v} {}              ///< torch.dtype
  Value(Global v) : Value(Kind::global, std::make_shared<Global>(std::move(v))) {}  ///< class/function reference
  Value(Object v);                                                                  ///< opaque object
  Value(StorageValue v);                                                            ///< bare storage

  /// Shares `other`'s containers, tensors and storages (copies only its plain data).
  Value(const Value& other) : kind_(other.kind_) {
    if (kind_ == Kind::string) {
      std::construct_at(&string_, other.string_);
    } else if (is_boxed(kind_)) {
      std::construct_at(&box_, other.box_);
    } else {
      scalar_ = other.scalar_;
    }
  }
  /// Takes `other`'s data, leaving it of the same kind with nothing inside (only assignment and destruction are valid
  /// then).
  Value(Value&& other) noexcept { take(other); }
  /// Shares as the copy constructor does; the old data is released after the copy is made.
  Value& operator=(const Value& other) {
    if (this != &other) {
      Value copy(other);  // first, so `other` may live inside what *this holds
      release();
      take(copy);
    }
    return *this;
  }
  /// Takes `other`'s data as the move constructor does.
  Value& operator=(Value&& other) noexcept {
    if (this != &other) {
      Value held(std::move(other));  // first, so `other` may live inside what *this holds
      release();
      take(held);
    }
    return *this;
  }
  /// Releases the string or this handle's share of a box.
  ~Value() { release(); }

  /// An nn.Parameter wrapping `data` (saved back through torch._utils._rebuild_parameter).
  [[nodiscard]] static Value parameter(Tensor data) {
    return Value(Kind::tensor, std::make_shared<TensorBox>(TensorBox{std::move(data), true}));
  }

  /// A tuple of `items`.
  [[nodiscard]] static Value tuple(List items) {
    return Value(Kind::tuple, std::make_shared<TupleBox>(TupleBox{std::move(items), {}}));
  }

  [[nodiscard]] Kind kind() const noexcept { return kind_; }                              ///< what it holds
  [[nodiscard]] bool is_none() const noexcept { return kind() == Kind::none; }            ///< None
  [[nodiscard]] bool is_bool() const noexcept { return kind() == Kind::boolean; }         ///< bool
  [[nodiscard]] bool is_int() const noexcept { return kind() == Kind::integer; }          ///< 64-bit int
  [[nodiscard]] bool is_big_int() const noexcept { return kind() == Kind::big_integer; }  ///< wider int
  [[nodiscard]] bool is_float() const noexcept { return kind() == Kind::floating; }       ///< float
  [[nodiscard]] bool is_complex() const noexcept { return kind() == Kind::complex; }      ///< complex
  [[nodiscard]] bool is_string() const noexcept { return kind() == Kind::string; }        ///< str
  [[nodiscard]] bool is_bytes() const noexcept { return kind() == Kind::bytes; }          ///< bytes
  [[nodiscard]] bool is_tuple() const noexcept { return kind() == Kind::tuple; }          ///< tuple
  [[nodiscard]] bool is_list() const noexcept { return kind() == Kind::list; }            ///< list
  [[nodiscard]] bool is_dict() const noexcept { return kind() == Kind::dict; }            ///< dict/OrderedDict
  [[nodiscard]] bool is_set() const noexcept { return kind() == Kind::set; }              ///< set/frozenset
  [[nodiscard]] bool is_tensor() const noexcept { return kind() == Kind::tensor; }        ///< tensor/Parameter
  [[nodiscard]] bool is_storage() const noexcept { return kind() == Kind::storage; }      ///< bare storage
  [[nodiscard]] bool is_device() const noexcept { return kind() == Kind::device; }        ///< torch.device
  [[nodiscard]] bool is_dtype() const noexcept { return kind() == Kind::dtype; }          ///< torch.dtype
  [[nodiscard]] bool is_global() const noexcept { return kind() == Kind::global; }        ///< class/function
  [[nodiscard]] bool is_object() const noexcept { return kind() == Kind::object; }        ///< opaque object

  /// The held value; each throws ArgumentError naming both kinds when the Value holds another kind.
  [[nodiscard]] bool as_bool() const { return expect(Kind::boolean).scalar_.boolean; }
  [[nodiscard]] std::int64_t as_int() const { return expect(Kind::integer).scalar_.integer; }
  [[nodiscard]] const BigInt& as_big_int() const { return expect(Kind::big_integer).box<BigInt>(); }
  /// A float, or an int converted to double.
  [[nodiscard]] double as_float() const {
    if (is_int()) return static_cast<double>(scalar_.integer);
    return expect(Kind::floating).scalar_.floating;
  }
  [[nodiscard]] std::complex<double> as_complex() const { return expect(Kind::complex).scalar_.complex; }
  [[nodiscard]] const std::string& as_string() const { return expect(Kind::string).string_; }
  [[nodiscard]] const Bytes& as_bytes() const { return expect(Kind::bytes).box<Bytes>(); }
  [[nodiscard]] const List& as_tuple() const { return expect(Kind::tuple).box<TupleBox>().items; }
  [[nodiscard]] List& as_list() const { return expect(Kind::list).box<ListBox>().items; }
  [[nodiscard]] Dict& as_dict() const;
  [[nodiscard]] Set& as_set() const;
  [[nodiscard]] const Tensor& as_tensor() const { return expect(Kind::tensor).box<TensorBox>().tensor; }
  /// Whether a tensor value is an nn.Parameter.
  [[nodiscard]] bool is_parameter() const noexcept { return is_tensor() && box<TensorBox>().parameter; }
  [[nodiscard]] const StorageValue& as_storage() const;
  [[nodiscard]] Device as_device() const { return expect(Kind::device).scalar_.device; }
  [[nodiscard]] DType as_dtype() const { return expect(Kind::dtype).scalar_.dtype; }
  [[nodiscard]] const Global& as_global() const { return expect(Kind::global).box<Global>(); }
  [[nodiscard]] Object& as_object() const;

  /// Elements of a list or tuple (items of neither throw).
  [[nodiscard]] const List& elements() const { return is_tuple() ? as_tuple() : as_list(); }
  /// Element i of a list or tuple; throws ArgumentError when out of range.
  [[nodiscard]] const Value& at(std::size_t index) const;
  /// Dict lookup by str key; throws ArgumentError when missing or not a dict.
  [[nodiscard]] const Value& operator[](std::string_view key) const;
  [[nodiscard]] const Value& operator[](const char* key) const { return (*this)[std::string_view(key)]; }
  /// List/tuple index, or dict lookup by int key (optimizer state uses int keys), as Python's v[i].
  [[nodiscard]] const Value& operator[](std::int64_t index) const;
  [[nodiscard]] const Value& operator[](int index) const { return (*this)[std::int64_t{index}]; }
  /// Number of elements of a list, tuple, dict or set; throws for other kinds.
  [[nodiscard]] std::size_t size() const;

  /// Whether two values hold equal data (deep; tensors by dtype, shape, requires_grad and the bits of their values).
  friend bool operator==(const Value& a, const Value& b);

  /// A deep copy: new containers, tensors cloned into new heap storages.
  [[nodiscard]] Value clone() const;

  /// Identity of a container, tensor or storage value, for sharing and cycle checks; null for plain values.
  [[nodiscard]] const void* identity() const noexcept;

  /// The name of a kind: "None", "int", "dict", "Tensor"...
  [[nodiscard]] static std::string_view kind_name(Kind kind) noexcept {
    constexpr std::string_view names[] = {"None",   "bool",    "int",    "int",   "float",  "complex",
                                          "str",    "bytes",   "tuple",  "list",  "dict",   "set",
                                          "Tensor", "storage", "device", "dtype", "global", "object"};
    return names[static_cast<std::size_t>(kind)];
  }

 private:
  friend detail::Nesting* detail::nesting_of(const Value& v) noexcept;

  struct ListBox {
    List items;
    mutable detail::Nesting nesting;
  };
  struct TupleBox {
    List items;
    mutable detail::Nesting nesting;
  };
  struct DictBox;
  struct SetBox;
  struct ObjectBox;
  struct TensorBox {
    Tensor tensor;
    bool parameter;
  };

  // Plain data, copied as bytes.
  union Scalar {
    std::int64_t integer = 0;
    bool boolean;
    double floating;
    std::complex<double> complex;
    Device device;
    DType dtype;
  };
  static_assert(std::is_trivially_copyable_v<Scalar> && std::is_trivially_destructible_v<Scalar>);

  // Kinds held in box_: every container, tensor and storage (shared, mutable or with an identity), and the
  // immutable BigInt, Bytes and Global (shared so a copy stays cheap).
  static constexpr std::uint32_t boxed_kinds =
      1u << static_cast<unsigned>(Kind::big_integer) | 1u << static_cast<unsigned>(Kind::bytes) |
      1u << static_cast<unsigned>(Kind::tuple) | 1u << static_cast<unsigned>(Kind::list) |
      1u << static_cast<unsigned>(Kind::dict) | 1u << static_cast<unsigned>(Kind::set) |
      1u << static_cast<unsigned>(Kind::tensor) | 1u << static_cast<unsigned>(Kind::storage) |
      1u << static_cast<unsigned>(Kind::global) | 1u << static_cast<unsigned>(Kind::object);
  // The boxed kinds whose box is their identity (BigInt, Bytes and Global compare by value only).
  static constexpr std::uint32_t identity_kinds =
      boxed_kinds & ~(1u << static_cast<unsigned>(Kind::big_integer) | 1u << static_cast<unsigned>(Kind::bytes) |
                      1u << static_cast<unsigned>(Kind::global));
  [[nodiscard]] static constexpr bool is_boxed(Kind kind) noexcept {
    return (boxed_kinds >> static_cast<unsigned>(kind) & 1u) != 0;
  }

  Value(Kind kind, std::shared_ptr<void> box) noexcept : kind_(kind), box_(std::move(box)) {}

  // *this, when it holds `wanted`; throws ArgumentError naming both kinds otherwise.
  const Value& expect(Kind wanted) const {
    if (kind_ != wanted) wrong_kind(wanted);
    return *this;
  }
  [[noreturn]] void wrong_kind(Kind wanted) const {
    throw ArgumentError("value is " + std::string(kind_name(kind_)) + "; expected " + std::string(kind_name(wanted)));
  }
  // The box of a boxed kind, as the type that kind stores.
  template <class Box>
  [[nodiscard]] Box& box() const noexcept {
    return *static_cast<Box*>(box_.get());
  }

  // Moves `other`'s data into *this, which holds nothing that needs releasing.
  void take(Value& other) noexcept {
    kind_ = other.kind_;
    if (kind_ == Kind::string) {
      std::construct_at(&string_, std::move(other.string_));
    } else if (is_boxed(kind_)) {
      std::construct_at(&box_, std::move(other.box_));
    } else {
      scalar_ = other.scalar_;
    }
  }
  // Ends the lifetime of the held string or box; *this must then be given new data (take) or be gone.
  void release() noexcept {
    if (kind_ == Kind::string) {
      std::destroy_at(&string_);
    } else if (is_boxed(kind_)) {
      std::destroy_at(&box_);
    }
  }

  // A hand-written tagged union rather than std::variant: copying, moving and destroying are one branch each,
  // so the many inline functions that pass Values around instantiate almost nothing.
  Kind kind_ = Kind::none;
  union {
    Scalar scalar_{};
    std::string string_;
    std::shared_ptr<void> box_;  // the box of is_boxed kinds: see box()
  };
};

namespace detail {

inline std::size_t hash_combine(std::size_t seed, std::size_t v) noexcept {
  return seed ^ (v + 0x9e3779b97f4a7c15ull + (seed << 6) + (seed >> 2));
}

/// Hash consistent with key equality: Python's rule that True == 1 == 1.0 is kept for ints and bools.
inline std::size_t hash_key(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::none: return 0x5a5a;
    case Value::Kind::boolean: return std::hash<std::int64_t>{}(v.as_bool() ? 1 : 0);
    case Value::Kind::integer: return std::hash<std::int64_t>{}(v.as_int());
    case Value::Kind::floating: {
      const double d = v.as_float();  // integral floats hash as the int they equal
      if (d == std::trunc(d) && d >= -9.2e18 && d <= 9.2e18)
        return std::hash<std::int64_t>{}(static_cast<std::int64_t>(d));
      return std::hash<double>{}(d);
    }
    case Value::Kind::string: return std::hash<std::string_view>{}(v.as_string());
    case Value::Kind::tuple: {
      std::size_t h = 0x7u;
      for (const auto& item : v.as_tuple()) h = hash_combine(h, hash_key(item));
      return h;
    }
    case Value::Kind::dtype: return static_cast<std::size_t>(v.as_dtype()) + 0x100;
    default: return static_cast<std::size_t>(v.kind()) * 0x1000193u;
  }
}

/// Dict's keys for its index: Python's hash and equality, and str lookups that make no Value.
struct DictKeys {
  using Item = std::pair<Value, Value>;
  static std::size_t hash(const Value& key) { return hash_key(key); }
  static std::size_t hash(std::string_view key) noexcept { return std::hash<std::string_view>{}(key); }
  static std::size_t hash_item(const Item& item) { return hash_key(item.first); }
  static bool matches(const Item& item, const Value& key) { return item.first == key; }
  static bool matches(const Item& item, std::string_view key) {
    return item.first.is_string() && item.first.as_string() == key;  // a str equals nothing but a str
  }
};

}  // namespace detail

/// An insertion-ordered dict with keys of any hashable kind (str, int, tuple, ...), as Python's
/// dict; `ordered` marks a collections.OrderedDict, and `attributes` holds the state a pickle
/// sets on it (a state_dict's `_metadata` lives there).
class Dict {
 public:
  using Item = std::pair<Value, Value>;  ///< key, value

  Dict() = default;
  /// A dict of str keys: `Dict{{"a", 1}, {"b", 2.0}}`.
  Dict(std::initializer_list<Item> items) {
    for (const auto& [k, v] : items) set(k, v);
  }

  bool ordered = false;  ///< a collections.OrderedDict (saved back as one)
  Value attributes;      ///< None, or a dict of instance attributes (OrderedDict `_metadata`)

  /// Inserts or replaces (keeping the position) the value of `key`; when it throws (an allocation), the
  /// dict stays as it was.
  void set(Value key, Value value) {
    auto [item, inserted] = index_.find_or_append(key, [&] { return Item(std::move(key), std::move(value)); });
    if (!inserted) item.second = std::move(value);
  }
  /// The value of `key`, or null.
  [[nodiscard]] const Value* find(const Value& key) const { return found(index_.find(key)); }
  /// The value of str `key`, or null.
  [[nodiscard]] const Value* find(std::string_view key) const { return found(index_.find(key)); }
  /// Whether `key` is present.
  [[nodiscard]] bool contains(const Value& key) const { return find(key) != nullptr; }
  /// Number of items.
  [[nodiscard]] std::size_t size() const noexcept { return index_.size(); }
  [[nodiscard]] bool empty() const noexcept { return index_.empty(); }
  /// Items in insertion order.
  [[nodiscard]] const std::vector<Item>& items() const noexcept { return index_.items(); }
  [[nodiscard]] auto begin() const noexcept { return index_.begin(); }
  [[nodiscard]] auto end() const noexcept { return index_.end(); }
  /// The `_metadata` of a state_dict (an OrderedDict of module prefix to {"version": N}), or null.
  [[nodiscard]] const Value* metadata() const {
    return attributes.is_dict() ? attributes.as_dict().find(std::string_view("_metadata")) : nullptr;
  }

 private:
  [[nodiscard]] const Value* found(std::size_t position) const noexcept {
    return position == decltype(index_)::npos ? nullptr : &index_[position].second;
  }

  detail::OrderedIndex<Item, detail::DictKeys> index_;
};

/// A Python set or frozenset, in the order the file listed its elements.
struct Set {
  List items;           ///< elements
  bool frozen = false;  ///< a frozenset
};

/// An opaque Python object: `module.name` called with `args` (REDUCE/NEWOBJ), then given `state`
/// (BUILD). Only permissive loads produce these; nothing is ever executed.
struct Object {
  std::string module;   ///< class or function module
  std::string name;     ///< class or function name
  Value args;           ///< the argument tuple
  Value state;          ///< None, or the state set by BUILD
  bool newobj = false;  ///< made by NEWOBJ (cls.__new__) rather than a call
};

/// A storage saved on its own: a 1-d tensor over all of its elements, and the saved device tag.
struct StorageValue {
  Tensor tensor;         ///< 1-d, contiguous, the whole storage
  std::string location;  ///< the device tag the file recorded ("cpu", "cuda:0")
};

struct Value::DictBox {
  Dict dict;
  detail::Nesting nesting;
};
struct Value::SetBox {
  Set set;
  detail::Nesting nesting;
};
struct Value::ObjectBox {
  Object object;
  detail::Nesting nesting;
};

inline Value::Value(Dict v) : Value(Kind::dict, std::make_shared<DictBox>(DictBox{std::move(v), {}})) {}
inline Value::Value(Set v) : Value(Kind::set, std::make_shared<SetBox>(SetBox{std::move(v), {}})) {}
inline Value::Value(Object v) : Value(Kind::object, std::make_shared<ObjectBox>(ObjectBox{std::move(v), {}})) {}
inline Value::Value(StorageValue v) : Value(Kind::storage, std::make_shared<StorageValue>(std::move(v))) {}
inline Dict& Value::as_dict() const { return expect(Kind::dict).box<DictBox>().dict; }
inline Set& Value::as_set() const { return expect(Kind::set).box<SetBox>().set; }
inline Object& Value::as_object() const { return expect(Kind::object).box<ObjectBox>().object; }

inline detail::Nesting* detail::nesting_of(const Value& v) noexcept {
  using Kind = Value::Kind;
  switch (v.kind()) {
    case Kind::list: return &v.box<Value::ListBox>().nesting;
    case Kind::tuple: return &v.box<Value::TupleBox>().nesting;
    case Kind::dict: return &v.box<Value::DictBox>().nesting;
    case Kind::set: return &v.box<Value::SetBox>().nesting;
    case Kind::object: return &v.box<Value::ObjectBox>().nesting;
    default: return nullptr;
  }
}
inline const StorageValue& Value::as_storage() const { return expect(Kind::storage).box<StorageValue>(); }

inline const Value& Value::at(std::size_t index) const {
  const List& items = elements();
  if (index >= items.size()) {
    throw ArgumentError("index " + std::to_string(index) + " is out of range; expected below " +
                        std::to_string(items.size()));
  }
  return items[index];
}

inline const Value& Value::operator[](std::string_view key) const {
  if (const Value* found = as_dict().find(key)) return *found;
  throw ArgumentError("key \"" + std::string(key) + "\" is not in the dict");
}

inline const Value& Value::operator[](std::int64_t index) const {
  if (is_dict()) {
    if (const Value* found = as_dict().find(Value(index))) return *found;
    throw ArgumentError("key " + std::to_string(index) + " is not in the dict");
  }
  const auto n = static_cast<std::int64_t>(elements().size());
  if (index < -n || index >= n) {
    throw ArgumentError("index " + std::to_string(index) + " is out of range; expected below " + std::to_string(n));
  }
  return elements()[static_cast<std::size_t>(index < 0 ? index + n : index)];
}

inline std::size_t Value::size() const {
  switch (kind()) {
    case Kind::list: return as_list().size();
    case Kind::tuple: return as_tuple().size();
    case Kind::dict: return as_dict().size();
    case Kind::set: return as_set().items.size();
    default: throw ArgumentError("value is " + std::string(kind_name(kind())) + "; expected a container");
  }
}

inline const void* Value::identity() const noexcept {
  return (identity_kinds >> static_cast<unsigned>(kind_) & 1u) != 0 ? box_.get() : nullptr;
}

namespace detail {
// Floats in Values: NaN equals NaN, so a Value always equals itself (unlike Python's float ==).
inline bool same_float(double a, double b) { return a == b || (std::isnan(a) && std::isnan(b)); }

// Tensors in Values compare by their bits (so a NaN equals itself and load(save(v)) == v holds).
inline bool same_tensor(const Tensor& a, const Tensor& b) {
  if (a.requires_grad() != b.requires_grad() || a.dtype() != b.dtype() || a.sizes() != b.sizes()) return false;
  if (a.device() != b.device()) return false;
  if (!a.device().is_cpu()) return true;  // meta (and device) tensors: shapes and dtypes only
  const Tensor x = a.contiguous();
  const Tensor y = b.contiguous();
  return x.nbytes() == 0 || std::memcmp(x.raw_data(), y.raw_data(), x.nbytes()) == 0;
}
inline bool same_items(const List& a, const List& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (!(a[i] == b[i])) return false;
  }
  return true;
}
}  // namespace detail

inline bool operator==(const Value& a, const Value& b) {
  using Kind = Value::Kind;
  if (a.kind() != b.kind()) {
    // Python: True == 1 and 1 == 1.0 (dict keys rely on it).
    const auto numeric = [](const Value& v) { return v.is_bool() || v.is_int() || v.is_float(); };
    if (!numeric(a) || !numeric(b)) return false;
    const auto as_number = [](const Value& v) { return v.is_bool() ? (v.as_bool() ? 1.0 : 0.0) : v.as_float(); };
    return as_number(a) == as_number(b);
  }
  if (a.identity() != nullptr && a.identity() == b.identity()) return true;
  switch (a.kind()) {
    case Kind::none: return true;
    case Kind::boolean: return a.as_bool() == b.as_bool();
    case Kind::integer: return a.as_int() == b.as_int();
    case Kind::big_integer: return a.as_big_int() == b.as_big_int();
    case Kind::floating: return detail::same_float(a.as_float(), b.as_float());
    case Kind::complex:
      return detail::same_float(a.as_complex().real(), b.as_complex().real()) &&
             detail::same_float(a.as_complex().imag(), b.as_complex().imag());
    case Kind::string: return a.as_string() == b.as_string();
    case Kind::bytes: return a.as_bytes() == b.as_bytes();
    case Kind::tuple: return detail::same_items(a.as_tuple(), b.as_tuple());
    case Kind::list: return detail::same_items(a.as_list(), b.as_list());
    case Kind::dict: {
      const Dict& x = a.as_dict();
      const Dict& y = b.as_dict();
      if (x.size() != y.size() || x.ordered != y.ordered || !(x.attributes == y.attributes)) return false;
      for (std::size_t i = 0; i < x.size(); ++i) {
        if (!(x.items()[i].first == y.items()[i].first) || !(x.items()[i].second == y.items()[i].second)) return false;
      }
      return true;
    }
    case Kind::set:
      return a.as_set().frozen == b.as_set().frozen && detail::same_items(a.as_set().items, b.as_set().items);
    case Kind::tensor: return a.is_parameter() == b.is_parameter() && detail::same_tensor(a.as_tensor(), b.as_tensor());
    case Kind::storage:
      return a.as_storage().location == b.as_storage().location &&
             detail::same_tensor(a.as_storage().tensor, b.as_storage().tensor);
    case Kind::device: return a.as_device() == b.as_device();
    case Kind::dtype: return a.as_dtype() == b.as_dtype();
    case Kind::global: return a.as_global() == b.as_global();
    case Kind::object: {
      const Object& x = a.as_object();
      const Object& y = b.as_object();
      return x.module == y.module && x.name == y.name && x.newobj == y.newobj && x.args == y.args && x.state == y.state;
    }
  }
  return false;
}

inline Value Value::clone() const {
  const auto clone_all = [](const List& items) {
    List out;
    out.reserve(items.size());
    for (const auto& item : items) out.push_back(item.clone());
    return out;
  };
  switch (kind()) {
    case Kind::tuple: return tuple(clone_all(as_tuple()));
    case Kind::list: return Value(clone_all(as_list()));
    case Kind::dict: {
      Dict out;
      out.ordered = as_dict().ordered;
      out.attributes = as_dict().attributes.clone();
      for (const auto& [k, v] : as_dict()) out.set(k.clone(), v.clone());
      return Value(std::move(out));
    }
    case Kind::set: return Value(Set{clone_all(as_set().items), as_set().frozen});
    case Kind::tensor: return is_parameter() ? parameter(as_tensor().clone()) : Value(as_tensor().clone());
    case Kind::storage: return Value(StorageValue{as_storage().tensor.clone(), as_storage().location});
    case Kind::object: {
      const Object& o = as_object();
      return Value(Object{o.module, o.name, o.args.clone(), o.state.clone(), o.newobj});
    }
    default: return *this;  // immutable kinds share safely
  }
}

}  // namespace tensorfile
