// SPDX-License-Identifier: MIT
/// @file
/// Value: the object tree torch.load returns (None, numbers, strings, containers, tensors, ...).
#pragma once

#include <complex>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <iterator>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "tensorfile/config.hpp"
#include "tensorfile/core/device.hpp"
#include "tensorfile/core/dtype.hpp"
#include "tensorfile/core/error.hpp"
#include "tensorfile/core/tensor.hpp"
#include "tensorfile/detail/bytes/keyed_hash.hpp"
#include "tensorfile/detail/ordered_index.hpp"

namespace tensorfile {

class Value;

/// Python's None.
struct None {
  /// Every None equals every other.
  friend constexpr bool operator==(None, None) noexcept { return true; }
};

/// A Python int beyond 64 bits: little-endian two's-complement bytes, as pickle stores them.
struct BigInt {
  std::vector<std::uint8_t> bytes;  ///< least significant byte first; the top bit of the last byte is the sign

  /// Decimal text, e.g. "1180591620717411303424".
  [[nodiscard]] std::string str() const;
  /// Same bytes.
  friend bool operator==(const BigInt&, const BigInt&) = default;
};

/// Python bytes (and bytearray).
struct Bytes {
  std::vector<std::byte> data;  ///< the bytes
  /// Same bytes.
  friend bool operator==(const Bytes&, const Bytes&) = default;
};

/// A reference to a Python class or function that tensorfile does not model, e.g.
/// `torch.per_tensor_affine` or `numpy.dtype`. Never called.
struct Global {
  std::string module;  ///< e.g. "numpy.core.multiarray"
  std::string name;    ///< e.g. "_reconstruct"
  /// Same module and name.
  friend bool operator==(const Global&, const Global&) = default;
};

/// An opaque Python object (permissive loads only): how it would be built, never built.
struct Object;
/// A torch storage saved on its own (`torch.save(t.storage())`), seen as a 1-d tensor of all its elements.
struct StorageValue;
class List;
class Dict;
struct Set;

namespace detail {
/// Loader bookkeeping every container carries: its nesting depth, whether it already sits inside another
/// container (it may not change then, so recorded depths stay true and no cycle forms), and how many values
/// it reaches counting a shared container once per place it appears (what a walk over it visits).
struct Nesting {
  std::uint32_t depth = 1;
  bool sealed = false;
  std::uint64_t reach = 1;
};
/// The bookkeeping of a container value; null for other kinds.
TENSORFILE_ENTRY Nesting* nesting_of(const Value& v) noexcept;
struct ValueAccess;
}  // namespace detail

/// A dict key that lookups take: str-like keys (std::string, const char*, std::string_view; found without
/// making a Value) or anything a Value is made from (an int key of optimizer state, a tuple...).
template <class Key>
concept DictKey = std::convertible_to<const Key&, std::string_view> || std::convertible_to<const Key&, Value>;

/// One step of a path into a Value (see Value::at_path): a str key, or an int that indexes a list or tuple
/// (negative from the end, as in Python) or looks up an int dict key.
class PathStep {
 public:
  PathStep(std::string_view key) : key_(key) {}                              ///< a str key
  PathStep(const char* key) : key_(key) {}                                   ///< a str key
  PathStep(const std::string& key) : key_(key) {}                            ///< a str key
  PathStep(int index) noexcept : index_(index), is_index_(true) {}           ///< an index or int key
  PathStep(std::int64_t index) noexcept : index_(index), is_index_(true) {}  ///< an index or int key
  /// An index or int key; throws ArgumentError above INT64_MAX.
  PathStep(std::size_t index) : index_(static_cast<std::int64_t>(index)), is_index_(true) {
    if (index_ < 0) throw ArgumentError("path index " + std::to_string(index) + " is too large");
  }

  [[nodiscard]] bool is_index() const noexcept { return is_index_; }      ///< an int step
  [[nodiscard]] std::int64_t index() const noexcept { return index_; }    ///< the int (0 for a key)
  [[nodiscard]] const std::string& key() const noexcept { return key_; }  ///< the str key ("" for an int)
  /// The step as Python writes a subscript: `["state"]`, `[0]`.
  [[nodiscard]] std::string str() const;

 private:
  std::string key_;
  std::int64_t index_ = 0;
  bool is_index_ = false;
};

/// One node of a loaded object tree. Value is a handle, like a Python reference: copies share
/// containers (a list reached twice is one list); clone() makes an independent deep copy.
/// Containers never hold themselves: the loader rejects cycles, and every mutating member (List::push_back,
/// Dict::set, ...) throws ArgumentError rather than form one. A const Value gives const access only; a copy of
/// the handle (cheap: it shares the container) gives mutable access, e.g. `Value state = ckpt["state"];`.
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

  Value() noexcept {}                                                                      ///< None
  Value(None) noexcept {}                                                                  ///< None
  Value(bool v) noexcept : kind_(Kind::boolean), scalar_{.boolean = v} {}                  ///< bool
  Value(int v) noexcept : kind_(Kind::integer), scalar_{.integer = v} {}                   ///< int
  Value(std::int64_t v) noexcept : kind_(Kind::integer), scalar_{.integer = v} {}          ///< int
  Value(BigInt v);                                                                         ///< int beyond 64 bits
  Value(double v) noexcept : kind_(Kind::floating), scalar_{.floating = v} {}              ///< float
  Value(std::complex<double> v) noexcept : kind_(Kind::complex), scalar_{.complex = v} {}  ///< complex
  Value(std::string v) : kind_(Kind::string), string_(std::move(v)) {}                     ///< str
  Value(const char* v) : kind_(Kind::string), string_(v) {}                                ///< str
  Value(std::string_view v) : kind_(Kind::string), string_(v) {}                           ///< str
  Value(Bytes v);                                                                          ///< bytes
  Value(List v);                                                                           ///< list
  Value(Dict v);                                                                           ///< dict
  Value(Set v);                                                                            ///< set
  Value(Tensor v);                                                                         ///< tensor
  Value(Device v) noexcept : kind_(Kind::device), scalar_{.device = v} {}                  ///< torch.device
  Value(DType v) noexcept : kind_(Kind::dtype), scalar_{.dtype = v} {}                     ///< torch.dtype
  Value(Global v);                                                                         ///< class/function reference
  Value(Object v);                                                                         ///< opaque object
  Value(StorageValue v);                                                                   ///< bare storage

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
  Value& operator=(const Value& other);
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
  [[nodiscard]] static Value parameter(Tensor data);

  /// A tuple of `items`.
  [[nodiscard]] static Value tuple(List items);

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
  /// A Python int within 64 bits.
  [[nodiscard]] std::int64_t as_int() const { return expect(Kind::integer).scalar_.integer; }
  /// A Python int beyond 64 bits.
  [[nodiscard]] const BigInt& as_big_int() const { return expect(Kind::big_integer).box<BigInt>(); }
  /// A float, or an int converted to double.
  [[nodiscard]] double as_float() const;
  /// A Python complex.
  [[nodiscard]] std::complex<double> as_complex() const { return expect(Kind::complex).scalar_.complex; }
  /// A str.
  [[nodiscard]] const std::string& as_string() const { return expect(Kind::string).string_; }
  /// A bytes or bytearray.
  [[nodiscard]] const Bytes& as_bytes() const { return expect(Kind::bytes).box<Bytes>(); }
  /// A tuple's elements.
  [[nodiscard]] const List& as_tuple() const;
  /// A list's elements, read only.
  [[nodiscard]] const List& as_list() const;
  /// The list, to change through List's checked members (which refuse cycles).
  [[nodiscard]] List& as_list();
  /// A dict or OrderedDict, read only.
  [[nodiscard]] const Dict& as_dict() const;
  /// The dict, to change through Dict's checked members (which refuse cycles).
  [[nodiscard]] Dict& as_dict();
  /// A set or frozenset, read only.
  [[nodiscard]] const Set& as_set() const;
  /// The set, to change through its items' checked members (which refuse cycles).
  [[nodiscard]] Set& as_set();
  /// A tensor or nn.Parameter.
  [[nodiscard]] const Tensor& as_tensor() const { return expect(Kind::tensor).box<TensorBox>(); }
  /// Whether a tensor value is an nn.Parameter.
  [[nodiscard]] bool is_parameter() const noexcept { return is_tensor() && box<TensorBox>().parameter; }
  /// A storage saved on its own.
  [[nodiscard]] const StorageValue& as_storage() const;
  /// A torch.device.
  [[nodiscard]] Device as_device() const { return expect(Kind::device).scalar_.device; }
  /// A torch.dtype.
  [[nodiscard]] DType as_dtype() const { return expect(Kind::dtype).scalar_.dtype; }
  /// A reference to a class or function.
  [[nodiscard]] const Global& as_global() const { return expect(Kind::global).box<Global>(); }
  /// The opaque object (read only: it describes what the file held).
  [[nodiscard]] const Object& as_object() const;

  /// Elements of a list or tuple (items of neither throw).
  [[nodiscard]] const List& elements() const { return is_tuple() ? as_tuple() : as_list(); }
  /// Element i of a list or tuple; throws ArgumentError when out of range.
  [[nodiscard]] const Value& at(std::size_t index) const;
  /// Dict lookup by str key; throws ArgumentError when missing or not a dict.
  [[nodiscard]] const Value& operator[](std::string_view key) const;
  /// Dict lookup by str key, as operator[](std::string_view).
  [[nodiscard]] const Value& operator[](const char* key) const { return (*this)[std::string_view(key)]; }
  /// List/tuple index, or dict lookup by int key (optimizer state uses int keys), as Python's v[i].
  [[nodiscard]] const Value& operator[](std::int64_t index) const;
  /// As operator[](std::int64_t); an exact match for an int literal, which `v[0]` would otherwise find ambiguous
  /// (`0` also converts to `const char*`).
  [[nodiscard]] const Value& operator[](int index) const { return (*this)[std::int64_t{index}]; }
  /// Number of elements of a list, tuple, dict or set; throws for other kinds.
  [[nodiscard]] std::size_t size() const;

  /// Whether a dict has `key` (any DictKey: "name", std::string, 0, ...); throws ArgumentError when not a dict.
  template <DictKey Key>
  [[nodiscard]] bool contains(const Key& key) const;
  /// The value of `key` in a dict, or `fallback` when missing (a handle: it shares containers); throws
  /// ArgumentError when not a dict.
  template <DictKey Key>
  [[nodiscard]] Value get(const Key& key, Value fallback = {}) const;
  /// The value at `path`, each step a str key or an int (list/tuple index or int dict key):
  /// `ckpt.at_path({"optimizer", "state", 0, "exp_avg"})`. Throws ArgumentError naming the path and the step that
  /// failed (a missing key, an index out of range, a value that is no container).
  [[nodiscard]] const Value& at_path(std::span<const PathStep> path) const;
  /// at_path() over a braced list of steps.
  [[nodiscard]] const Value& at_path(std::initializer_list<PathStep> path) const {
    return at_path(std::span<const PathStep>(path.begin(), path.size()));
  }
  /// The value at `path` as at_path() finds it, or null where at_path() would throw.
  [[nodiscard]] const Value* find_path(std::span<const PathStep> path) const;
  /// find_path() over a braced list of steps.
  [[nodiscard]] const Value* find_path(std::initializer_list<PathStep> path) const {
    return find_path(std::span<const PathStep>(path.begin(), path.size()));
  }

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
  friend struct detail::ValueAccess;

  struct ListBox;
  struct TupleBox;
  struct DictBox;
  struct SetBox;
  struct ObjectBox;
  // Derived rather than a member, so that `parameter` takes a byte of Tensor's tail padding (the ABI reuses
  // a non-POD base's) instead of 8 bytes after it.
  struct TensorBox : Tensor {
    TensorBox(Tensor&& tensor, bool is_parameter) noexcept : Tensor(std::move(tensor)), parameter(is_parameter) {}
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
  [[noreturn]] void wrong_kind(Kind wanted) const;
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
/// Throws ArgumentError when putting `item` into the container whose contents live at `container` (a List, or a
/// Dict) would make that container hold itself; `kind` names it in the message.
TENSORFILE_ENTRY void refuse_cycle(const Value& item, const void* container, std::string_view kind);
}  // namespace detail

/// Python list (and tuple) contents: a vector of Values whose mutating members refuse cycles. Reading is as
/// std::vector's (size, [], begin/end, ...) but const: an element is replaced with set(), never through a
/// reference, so nothing can slip a list into itself.
class List {
 public:
  using value_type = Value;                                     ///< element type
  using size_type = std::size_t;                                ///< index type
  using const_iterator = std::vector<Value>::const_iterator;    ///< iterator (const only)
  using iterator = const_iterator;                              ///< iterator (const only)
  using const_reference = const Value&;                         ///< element reference
  using reference = const Value&;                               ///< element reference (const only)
  using difference_type = std::vector<Value>::difference_type;  ///< iterator distance

  List() = default;
  /// `List{1, "two", tensor}`.
  List(std::initializer_list<Value> items);
  /// The Values in [first, last).
  template <std::input_iterator It>
  List(It first, It last) : items_(first, last) {}
  /// Takes the Values of `items`.
  explicit List(std::vector<Value> items) noexcept : items_(std::move(items)) {}
  List(const List& other);          ///< shares the elements' containers (as copying each Value)
  List(List&&) noexcept = default;  ///< takes the elements
  /// Replaces every element; throws ArgumentError (changing nothing) when one holds this list.
  List& operator=(const List& other);
  /// Takes `other`'s elements; throws ArgumentError (changing nothing) when one holds this list.
  List& operator=(List&& other);

  [[nodiscard]] std::size_t size() const noexcept { return items_.size(); }       ///< number of elements
  [[nodiscard]] bool empty() const noexcept { return items_.empty(); }            ///< no element
  [[nodiscard]] const_iterator begin() const noexcept { return items_.begin(); }  ///< first element
  [[nodiscard]] const_iterator end() const noexcept { return items_.end(); }      ///< past the last element
  /// Element `index` (< size(), unchecked).
  [[nodiscard]] const Value& operator[](std::size_t index) const noexcept { return items_[index]; }
  /// Element `index`; throws ArgumentError when out of range.
  [[nodiscard]] const Value& at(std::size_t index) const;
  [[nodiscard]] const Value& front() const noexcept { return items_.front(); }  ///< first element (not empty)
  [[nodiscard]] const Value& back() const noexcept { return items_.back(); }    ///< last element (not empty)
  /// The elements as a span.
  [[nodiscard]] std::span<const Value> items() const noexcept { return {items_.data(), items_.size()}; }

  /// Makes room for `count` elements.
  void reserve(std::size_t count);
  /// Appends `item`; throws ArgumentError (changing nothing) when `item` holds this list.
  void push_back(Value item);
  /// Appends a Value made from `args`; throws ArgumentError (changing nothing) when it holds this list.
  template <class... Args>
  requires std::constructible_from<Value, Args&&...>
  void emplace_back(Args&&... args) { push_back(Value(std::forward<Args>(args)...)); }
  /// Inserts `item` before element `index` (<= size()); throws ArgumentError when out of range or when `item`
  /// holds this list.
  void insert(std::size_t index, Value item);
  /// Replaces element `index`; throws ArgumentError when out of range or when `item` holds this list.
  void set(std::size_t index, Value item);
  /// Removes element `index`; throws ArgumentError when out of range.
  void erase(std::size_t index);
  /// Removes the last element (not empty).
  void pop_back() noexcept;
  /// Removes every element.
  void clear() noexcept;

  /// Element-wise equality, as Value's ==.
  friend bool operator==(const List& a, const List& b);

 private:
  friend struct detail::ValueAccess;
  void refuse_cycles(const List& other) const;
  void check_index(std::size_t index, std::size_t limit) const;

  std::vector<Value> items_;
};

namespace detail {

/// Hash consistent with key equality: Python's rule that True == 1 == 1.0 is kept for ints and bools.
TENSORFILE_ENTRY std::size_t hash_key(const Value& v);
/// Hash consistent with operator== (how same_key compares every kind but tensors, storages and tuples).
TENSORFILE_ENTRY std::size_t hash_value(const Value& v);
/// Key equality: as operator==, but a tensor or storage is a key by what it is, not by its values (torch hashes
/// tensors by identity): the same view (kind, dtype, shape, strides, offset) of the same storage. So keys never
/// read tensor bytes (a load compares them before the records are read), and distinct tensors are distinct keys.
/// An opaque object is a key by identity, as Python's objects are by default: keys a pickled dict held apart stay
/// apart (by what they hold, {K(1): 'a', K(1): 'b'} lost an entry). Tuples and frozensets compare items as keys.
TENSORFILE_ENTRY bool same_key(const Value& a, const Value& b);

/// Dict's keys for its index: Python's hash and equality, and str lookups that make no Value.
struct DictKeys {
  using Item = std::pair<Value, Value>;
  static std::size_t hash(const Value& key) { return hash_key(key); }
  static std::size_t hash(std::string_view key) noexcept { return static_cast<std::size_t>(keyed_hash(key)); }
  static std::size_t hash_item(const Item& item) { return hash_key(item.first); }
  static bool matches(const Item& item, const Value& key) { return same_key(item.first, key); }
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
  Dict(std::initializer_list<Item> items);
  Dict(const Dict&) = default;      ///< shares the items' containers (as copying each Value)
  Dict(Dict&&) noexcept = default;  ///< takes the items
  /// Replaces every item and the attributes; throws ArgumentError (changing nothing) when one holds this dict.
  Dict& operator=(const Dict& other);
  /// Takes `other`'s items and attributes; throws ArgumentError (changing nothing) when one holds this dict.
  Dict& operator=(Dict&& other);

  bool ordered = false;  ///< a collections.OrderedDict (saved back as one)

  /// None, or a dict of instance attributes (OrderedDict `_metadata`).
  [[nodiscard]] const Value& attributes() const noexcept { return attributes_; }
  /// Replaces the attributes; throws ArgumentError (changing nothing) when `attributes` holds this dict.
  void set_attributes(Value attributes);

  /// Inserts or replaces (keeping the position) the value of `key`. Throws ArgumentError (changing nothing)
  /// when `key` or `value` holds this dict; when anything else throws (an allocation), the dict stays as it was.
  void set(Value key, Value value);
  /// The value of `key` ("name", std::string, std::string_view, 0, a Value...), or null.
  template <DictKey Key>
  [[nodiscard]] const Value* find(const Key& key) const {
    return found(position_of(key));
  }
  /// Whether `key` is present.
  template <DictKey Key>
  [[nodiscard]] bool contains(const Key& key) const {
    return position_of(key) != npos;
  }
  /// The value of `key`, or `fallback` when missing (a handle: it shares containers).
  template <DictKey Key>
  [[nodiscard]] Value get(const Key& key, Value fallback = {}) const {
    const Value* value = find(key);
    return value ? *value : std::move(fallback);
  }
  /// The value of `key`; throws ArgumentError naming the key when missing.
  template <DictKey Key>
  [[nodiscard]] const Value& at(const Key& key) const;
  /// Removes `key` and its value, keeping the others' order; whether it was present.
  template <DictKey Key>
  bool erase(const Key& key) {
    const std::size_t position = position_of(key);
    if (position == npos) return false;
    index_.erase(position);
    return true;
  }
  /// Removes every item (the attributes stay).
  void clear() noexcept;
  /// Number of items.
  [[nodiscard]] std::size_t size() const noexcept { return index_.size(); }
  [[nodiscard]] bool empty() const noexcept { return index_.empty(); }  ///< no item
  /// Items in insertion order.
  [[nodiscard]] const std::vector<Item>& items() const noexcept { return index_.items(); }
  [[nodiscard]] auto begin() const noexcept { return index_.begin(); }  ///< first item
  [[nodiscard]] auto end() const noexcept { return index_.end(); }      ///< past the last item
  /// The `_metadata` of a state_dict (an OrderedDict of module prefix to {"version": N}), or null.
  [[nodiscard]] const Value* metadata() const;

 private:
  friend struct detail::ValueAccess;
  using Index = detail::OrderedIndex<Item, detail::DictKeys>;
  static constexpr std::size_t npos = Index::npos;

  template <class Key>
  [[nodiscard]] std::size_t position_of(const Key& key) const {
    if constexpr (std::is_convertible_v<const Key&, std::string_view>) {
      return index_.find(std::string_view(key));  // a str key: no Value made
    } else if constexpr (std::is_same_v<Key, Value>) {
      return index_.find(key);
    } else {
      return index_.find(Value(key));
    }
  }
  [[nodiscard]] const Value* found(std::size_t position) const noexcept {
    return position == npos ? nullptr : &index_[position].second;
  }
  // References: a file's dict insertions move each Value once less.
  void set_unchecked(Value&& key, Value&& value);

  void refuse_cycles_into(const Dict* target) const;
  void swap_with(Dict& other) noexcept;

  Index index_;
  Value attributes_;
};

/// A Python set or frozenset, in the order the file listed its elements.
struct Set {
  List items;           ///< elements (List's members refuse cycles)
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

struct Value::ListBox {
  List items;
  detail::Nesting nesting;
};
struct Value::TupleBox {
  List items;
  detail::Nesting nesting;
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

namespace detail {

/// The loader's access to containers. It builds trees bottom up and refuses cycles itself (pickle_machine's
/// sealed containers), so it skips the checks of the public mutators, which would walk every child on its hot path.
struct ValueAccess {
  using TensorBox = Value::TensorBox;
  /// A tensor Value over `box`, a TensorBox that the pointer's owner keeps alive (see TensorArena).
  static Value tensor_in(std::shared_ptr<void> box) noexcept { return Value(Value::Kind::tensor, std::move(box)); }
  /// The tensor in a tensor Value's box, for a loader replacing its storage in place: every Value sharing the box
  /// (the same pickled object) sees the change, and no box is made again.
  static Tensor& tensor(const Value& v) { return v.expect(Value::Kind::tensor).box<TensorBox>(); }
  static std::vector<Value>& items(List& list) noexcept { return list.items_; }
  static std::vector<Value>& list_items(const Value& v) {
    return v.expect(Value::Kind::list).box<Value::ListBox>().items.items_;
  }
  static std::vector<Value>& set_items(const Value& v) {
    return v.expect(Value::Kind::set).box<Value::SetBox>().set.items.items_;
  }
  static Set& set(const Value& v) { return v.expect(Value::Kind::set).box<Value::SetBox>().set; }
  static Dict& dict(const Value& v) { return v.expect(Value::Kind::dict).box<Value::DictBox>().dict; }
  static Object& object(const Value& v) { return v.expect(Value::Kind::object).box<Value::ObjectBox>().object; }
  static void set(Dict& dict, Value key, Value value) { dict.set_unchecked(std::move(key), std::move(value)); }
  static void reserve_more(Dict& dict, std::size_t count);
  /// Removes the items `drop(const Dict::Item&)` accepts, in one pass (Dict::erase of each is a pass apiece).
  template <class Drop>
  static std::size_t erase_if(Dict& dict, Drop&& drop) {
    return dict.index_.erase_if(std::forward<Drop>(drop));
  }
  /// How many items the dict holds room for (its item vector's capacity).
  static std::size_t room(const Dict& dict) noexcept;
  /// Gives back the dict's room beyond its items (best effort).
  static void fit(Dict& dict) noexcept;
  static Value& attributes(Dict& dict) noexcept { return dict.attributes_; }
  static std::span<Dict::Item> items(Dict& dict) noexcept;
  /// Where a container's contents live, as the public mutators know their own address; null for other kinds.
  static const void* contents(const Value& v) noexcept {
    switch (v.kind()) {
      case Value::Kind::list: return &v.box<Value::ListBox>().items;
      case Value::Kind::tuple: return &v.box<Value::TupleBox>().items;
      case Value::Kind::dict: return &v.box<Value::DictBox>().dict;
      case Value::Kind::set: return &v.box<Value::SetBox>().set.items;
      case Value::Kind::object: return &v.box<Value::ObjectBox>().object;
      default: return nullptr;
    }
  }
};

/// Equality as Value's operator== sees it: floats are the same when equal or both NaN; tensors when their dtype,
/// shape and bytes are; lists item by item.
TENSORFILE_ENTRY bool same_float(double a, double b);
TENSORFILE_ENTRY bool same_tensor(const Tensor& a, const Tensor& b);
TENSORFILE_ENTRY bool same_items(const List& a, const List& b);

}  // namespace detail

template <DictKey Key>
const Value& Dict::at(const Key& key) const {
  if (const Value* value = find(key)) return *value;
  if constexpr (std::is_convertible_v<const Key&, std::string_view>) {
    throw ArgumentError("key \"" + std::string(std::string_view(key)) + "\" is not in the dict");
  } else {
    const Value shown(key);
    throw ArgumentError(
        "key " + (shown.is_int() ? std::to_string(shown.as_int()) : std::string(Value::kind_name(shown.kind()))) +
        " is not in the dict");
  }
}

template <DictKey Key>
bool Value::contains(const Key& key) const {
  return as_dict().contains(key);
}

template <DictKey Key>
Value Value::get(const Key& key, Value fallback) const {
  return as_dict().get(key, std::move(fallback));
}

}  // namespace tensorfile

#if TENSORFILE_DEFINITIONS_OF(core_value)
#include <bit>
#include <cmath>
#include <unordered_set>

namespace tensorfile {

TENSORFILE_ENTRY std::string BigInt::str() const {
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
TENSORFILE_ENTRY Value::Value(BigInt v) : Value(Kind::big_integer, std::make_shared<BigInt>(std::move(v))) {}
TENSORFILE_ENTRY Value::Value(Bytes v) : Value(Kind::bytes, std::make_shared<Bytes>(std::move(v))) {}
TENSORFILE_ENTRY Value::Value(Tensor v) : Value(Kind::tensor, std::make_shared<TensorBox>(std::move(v), false)) {}
TENSORFILE_ENTRY Value::Value(Global v) : Value(Kind::global, std::make_shared<Global>(std::move(v))) {}
TENSORFILE_ENTRY const Value* Dict::metadata() const {
  return attributes_.is_dict() ? attributes_.as_dict().find("_metadata") : nullptr;
}
TENSORFILE_ENTRY void Dict::swap_with(Dict& other) noexcept {
  std::swap(ordered, other.ordered);
  std::swap(index_, other.index_);
  std::swap(attributes_, other.attributes_);
}
TENSORFILE_ENTRY Value::Value(List v) : Value(Kind::list, std::make_shared<ListBox>(ListBox{std::move(v), {}})) {}
TENSORFILE_ENTRY Value Value::tuple(List items) {
  return Value(Kind::tuple, std::make_shared<TupleBox>(TupleBox{std::move(items), {}}));
}
TENSORFILE_ENTRY Value::Value(Dict v) : Value(Kind::dict, std::make_shared<DictBox>(DictBox{std::move(v), {}})) {}
TENSORFILE_ENTRY Value::Value(Set v) : Value(Kind::set, std::make_shared<SetBox>(SetBox{std::move(v), {}})) {}
TENSORFILE_ENTRY Value::Value(Object v)
    : Value(Kind::object, std::make_shared<ObjectBox>(ObjectBox{std::move(v), {}})) {}
TENSORFILE_ENTRY Value::Value(StorageValue v) : Value(Kind::storage, std::make_shared<StorageValue>(std::move(v))) {}
TENSORFILE_ENTRY const List& Value::as_tuple() const { return expect(Kind::tuple).box<TupleBox>().items; }
TENSORFILE_ENTRY const List& Value::as_list() const { return expect(Kind::list).box<ListBox>().items; }
TENSORFILE_ENTRY List& Value::as_list() { return expect(Kind::list).box<ListBox>().items; }
TENSORFILE_ENTRY const Dict& Value::as_dict() const { return expect(Kind::dict).box<DictBox>().dict; }
TENSORFILE_ENTRY Dict& Value::as_dict() { return expect(Kind::dict).box<DictBox>().dict; }
TENSORFILE_ENTRY const Set& Value::as_set() const { return expect(Kind::set).box<SetBox>().set; }
TENSORFILE_ENTRY Set& Value::as_set() { return expect(Kind::set).box<SetBox>().set; }
TENSORFILE_ENTRY const Object& Value::as_object() const { return expect(Kind::object).box<ObjectBox>().object; }

namespace detail {

TENSORFILE_ENTRY void refuse_cycle(const Value& item, const void* container, std::string_view kind) {
  if (ValueAccess::contents(item) == nullptr) return;  // a scalar, str, tensor...: holds nothing
  // Depth first over the containers `item` reaches, each visited once (shared ones would repeat).
  std::vector<const Value*> pending{&item};
  std::unordered_set<const void*> seen;
  const auto visit = [&](const Value& child) {
    if (ValueAccess::contents(child) != nullptr && seen.insert(child.identity()).second) pending.push_back(&child);
  };
  while (!pending.empty()) {
    const Value& v = *pending.back();
    pending.pop_back();
    if (ValueAccess::contents(v) == container) {
      throw ArgumentError("a " + std::string(kind) + " cannot hold itself; expected a value that does not contain " +
                          "the " + std::string(kind) + " it is put into (no cycles)");
    }
    switch (v.kind()) {
      case Value::Kind::list:
      case Value::Kind::tuple:
        for (const Value& child : v.elements()) visit(child);
        break;
      case Value::Kind::set:
        for (const Value& child : v.as_set().items) visit(child);
        break;
      case Value::Kind::dict:
        for (const auto& [key, child] : v.as_dict()) {
          visit(key);
          visit(child);
        }
        visit(v.as_dict().attributes());
        break;
      case Value::Kind::object:
        visit(v.as_object().args);
        visit(v.as_object().state);
        break;
      default: break;
    }
  }
}

}  // namespace detail

TENSORFILE_ENTRY List::List(std::initializer_list<Value> items) : items_(items) {}
TENSORFILE_ENTRY List::List(const List& other) = default;
TENSORFILE_ENTRY void List::reserve(std::size_t count) { items_.reserve(count); }

TENSORFILE_ENTRY const Value& List::at(std::size_t index) const {
  check_index(index, items_.size());
  return items_[index];
}
TENSORFILE_ENTRY void List::insert(std::size_t index, Value item) {
  check_index(index, items_.size() + 1);
  detail::refuse_cycle(item, this, "list");
  items_.insert(items_.begin() + static_cast<difference_type>(index), std::move(item));
}
TENSORFILE_ENTRY void List::set(std::size_t index, Value item) {
  check_index(index, items_.size());
  detail::refuse_cycle(item, this, "list");
  items_[index] = std::move(item);
}
TENSORFILE_ENTRY void List::erase(std::size_t index) {
  check_index(index, items_.size());
  items_.erase(items_.begin() + static_cast<difference_type>(index));
}
TENSORFILE_ENTRY void List::check_index(std::size_t index, std::size_t limit) const {
  if (index >= limit) {
    throw ArgumentError("index " + std::to_string(index) + " is out of range; expected below " + std::to_string(limit));
  }
}

TENSORFILE_ENTRY detail::Nesting* detail::nesting_of(const Value& v) noexcept {
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
TENSORFILE_ENTRY const StorageValue& Value::as_storage() const { return expect(Kind::storage).box<StorageValue>(); }

TENSORFILE_ENTRY const Value& Value::at(std::size_t index) const {
  const List& items = elements();
  if (index >= items.size()) {
    throw ArgumentError("index " + std::to_string(index) + " is out of range; expected below " +
                        std::to_string(items.size()));
  }
  return items[index];
}

TENSORFILE_ENTRY const Value& Value::operator[](std::string_view key) const {
  if (const Value* found = as_dict().find(key)) return *found;
  throw ArgumentError("key \"" + std::string(key) + "\" is not in the dict");
}

TENSORFILE_ENTRY const Value& Value::operator[](std::int64_t index) const {
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

TENSORFILE_ENTRY std::size_t Value::size() const {
  switch (kind()) {
    case Kind::list: return as_list().size();
    case Kind::tuple: return as_tuple().size();
    case Kind::dict: return as_dict().size();
    case Kind::set: return as_set().items.size();
    default: throw ArgumentError("value is " + std::string(kind_name(kind())) + "; expected a container");
  }
}

TENSORFILE_ENTRY const void* Value::identity() const noexcept {
  return (identity_kinds >> static_cast<unsigned>(kind_) & 1u) != 0 ? box_.get() : nullptr;
}

namespace detail {
// Floats in Values: NaN equals NaN, so a Value always equals itself (unlike Python's float ==).
TENSORFILE_ENTRY bool same_float(double a, double b) { return a == b || (std::isnan(a) && std::isnan(b)); }

// Tensors in Values compare by their bits (so a NaN equals itself and load(save(v)) == v holds).
TENSORFILE_ENTRY bool same_tensor(const Tensor& a, const Tensor& b) {
  if (a.requires_grad() != b.requires_grad() || a.dtype() != b.dtype() || a.sizes() != b.sizes()) return false;
  if (a.device() != b.device()) return false;
  if (!a.device().is_cpu()) return true;  // meta (and device) tensors: shapes and dtypes only
  const Tensor x = a.contiguous();
  const Tensor y = b.contiguous();
  return x.nbytes() == 0 || std::memcmp(x.raw_data(), y.raw_data(), x.nbytes()) == 0;
}
TENSORFILE_ENTRY bool same_items(const List& a, const List& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (!(a[i] == b[i])) return false;
  }
  return true;
}
}  // namespace detail

TENSORFILE_ENTRY bool operator==(const Value& a, const Value& b) {
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
      if (x.size() != y.size() || x.ordered != y.ordered || !(x.attributes() == y.attributes())) return false;
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

TENSORFILE_ENTRY bool operator==(const List& a, const List& b) { return detail::same_items(a, b); }

TENSORFILE_ENTRY Value Value::clone() const {
  // Clones are new containers, so they cannot hold a cycle: the unchecked paths skip walking each clone again.
  const auto clone_all = [](const List& items) {
    std::vector<Value> out;
    out.reserve(items.size());
    for (const auto& item : items) out.push_back(item.clone());
    return List(std::move(out));
  };
  switch (kind()) {
    case Kind::tuple: return tuple(clone_all(as_tuple()));
    case Kind::list: return Value(clone_all(as_list()));
    case Kind::dict: {
      Dict out;
      out.ordered = as_dict().ordered;
      detail::ValueAccess::attributes(out) = as_dict().attributes().clone();
      for (const auto& [k, v] : as_dict()) detail::ValueAccess::set(out, k.clone(), v.clone());
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

TENSORFILE_ENTRY std::string PathStep::str() const {
  if (is_index_) return "[" + std::to_string(index_) + "]";
  return "[\"" + key_ + "\"]";
}

namespace detail {
// One step of a path from `v`, or null with `why` set.
inline const Value* path_step(const Value& v, const PathStep& step, std::string& why) {
  if (v.is_dict()) {
    const Value* found = step.is_index() ? v.as_dict().find(step.index()) : v.as_dict().find(step.key());
    if (found == nullptr) {
      why = step.is_index() ? "key " + std::to_string(step.index()) + " is not in the dict"
                            : "key \"" + step.key() + "\" is not in the dict";
    }
    return found;
  }
  if (v.is_list() || v.is_tuple()) {
    if (!step.is_index()) {
      why = "a " + std::string(Value::kind_name(v.kind())) + " has no key \"" + step.key() + "\"; expected an index";
      return nullptr;
    }
    const auto n = static_cast<std::int64_t>(v.elements().size());
    const std::int64_t index = step.index();
    if (index < -n || index >= n) {
      why = "index " + std::to_string(index) + " is out of range; expected below " + std::to_string(n);
      return nullptr;
    }
    return &v.elements()[static_cast<std::size_t>(index < 0 ? index + n : index)];
  }
  why = "value is " + std::string(Value::kind_name(v.kind())) + "; expected a dict, list or tuple";
  return nullptr;
}
}  // namespace detail

TENSORFILE_ENTRY const Value* Value::find_path(std::span<const PathStep> path) const {
  const Value* at = this;
  std::string why;
  for (const PathStep& step : path) {
    at = detail::path_step(*at, step, why);
    if (at == nullptr) return nullptr;
  }
  return at;
}

TENSORFILE_ENTRY const Value& Value::at_path(std::span<const PathStep> path) const {
  const Value* at = this;
  std::string why;
  std::string walked;
  for (const PathStep& step : path) {
    at = detail::path_step(*at, step, why);
    if (at == nullptr) {
      std::string whole;
      for (const PathStep& s : path) whole += s.str();
      throw ArgumentError("no value at " + whole + ": " + (walked.empty() ? "" : "at " + walked + ", ") + why);
    }
    walked += step.str();
  }
  return *at;
}

TENSORFILE_ENTRY Value& Value::operator=(const Value& other) {
  if (this != &other) {
    Value copy(other);  // first, so `other` may live inside what *this holds
    release();
    take(copy);
  }
  return *this;
}

TENSORFILE_ENTRY Value Value::parameter(Tensor data) {
  return Value(Kind::tensor, std::make_shared<TensorBox>(std::move(data), true));
}

TENSORFILE_ENTRY double Value::as_float() const {
  if (is_int()) return static_cast<double>(scalar_.integer);
  return expect(Kind::floating).scalar_.floating;
}

TENSORFILE_ENTRY void Value::wrong_kind(Kind wanted) const {
  throw ArgumentError("value is " + std::string(kind_name(kind_)) + "; expected " + std::string(kind_name(wanted)));
}

TENSORFILE_ENTRY List& List::operator=(const List& other) {
  if (this != &other) {
    refuse_cycles(other);
    items_ = other.items_;
  }
  return *this;
}

TENSORFILE_ENTRY List& List::operator=(List&& other) {
  if (this != &other) {
    refuse_cycles(other);
    items_ = std::move(other.items_);
  }
  return *this;
}

TENSORFILE_ENTRY void List::push_back(Value item) {
  detail::refuse_cycle(item, this, "list");
  items_.push_back(std::move(item));
}

TENSORFILE_ENTRY void List::refuse_cycles(const List& other) const {
  for (const Value& item : other.items_) detail::refuse_cycle(item, this, "list");
}

TENSORFILE_ENTRY Dict::Dict(std::initializer_list<Item> items) {
  for (const auto& [k, v] : items) set(k, v);
}

TENSORFILE_ENTRY Dict& Dict::operator=(const Dict& other) {
  if (this != &other) {
    other.refuse_cycles_into(this);
    Dict copy(other);
    swap_with(copy);
  }
  return *this;
}

TENSORFILE_ENTRY Dict& Dict::operator=(Dict&& other) {
  if (this != &other) {
    other.refuse_cycles_into(this);
    swap_with(other);
  }
  return *this;
}

TENSORFILE_ENTRY void Dict::set_attributes(Value attributes) {
  detail::refuse_cycle(attributes, this, "dict");
  attributes_ = std::move(attributes);
}

TENSORFILE_ENTRY void Dict::set(Value key, Value value) {
  detail::refuse_cycle(key, this, "dict");
  detail::refuse_cycle(value, this, "dict");
  set_unchecked(std::move(key), std::move(value));
}

TENSORFILE_ENTRY void Dict::set_unchecked(Value&& key, Value&& value) {
  auto [item, inserted] = index_.find_or_append(key, [&] { return Item(std::move(key), std::move(value)); });
  if (!inserted) item.second = std::move(value);
}
TENSORFILE_ENTRY void Dict::refuse_cycles_into(const Dict* target) const {
  for (const auto& [key, value] : index_) {
    detail::refuse_cycle(key, target, "dict");
    detail::refuse_cycle(value, target, "dict");
  }
  detail::refuse_cycle(attributes_, target, "dict");
}

namespace detail {

inline std::size_t hash_combine(std::size_t seed, std::size_t v) noexcept {
  return seed ^ (v + 0x9e3779b97f4a7c15ull + (seed << 6) + (seed >> 2));
}

// Every leaf a file chooses is hashed under process_hash_key: n keys of one hash make a dict cost n^2 to build
// (a dict of 20,000 complex or opaque-object keys, each kind once one constant, took 0.9 s and 4.6 s).
TENSORFILE_ENTRY std::size_t hash_value(const Value& v) {
  const auto number = [](std::uint64_t n) { return static_cast<std::size_t>(keyed_hash(n)); };
  const auto text = [](std::string_view s) { return static_cast<std::size_t>(keyed_hash(s)); };
  // Floats equal under same_float hash alike: -0.0 as 0.0, every NaN as one.
  const auto float_bits = [](double d) {
    return std::isnan(d) ? 0x7ff8000000000000ull : std::bit_cast<std::uint64_t>(d == 0.0 ? 0.0 : d);
  };
  const auto items = [](std::size_t seed, const List& list) {
    for (const auto& item : list) seed = hash_combine(seed, hash_value(item));
    return seed;
  };
  const auto device = [&](Device d) {
    return number(static_cast<std::uint64_t>(d.kind) << 32 ^ static_cast<std::uint32_t>(d.index));
  };
  const auto tensor_meta = [&](const Tensor& t) {  // what same_tensor compares, but the bytes
    std::size_t h = hash_combine(number(static_cast<std::uint64_t>(t.dtype())), t.requires_grad() ? 1u : 2u);
    h = hash_combine(h, device(t.device()));
    for (const std::int64_t size : t.sizes()) h = hash_combine(h, number(static_cast<std::uint64_t>(size)));
    return h;
  };
  switch (v.kind()) {
    case Value::Kind::none: return 0x5a5a;
    case Value::Kind::boolean: return number(v.as_bool() ? 1 : 0);
    case Value::Kind::integer: return number(static_cast<std::uint64_t>(v.as_int()));
    case Value::Kind::floating: {
      const double d = v.as_float();  // integral floats hash as the int they equal
      if (d == std::trunc(d) && d >= -9.2e18 && d <= 9.2e18) {
        return number(static_cast<std::uint64_t>(static_cast<std::int64_t>(d)));
      }
      return number(float_bits(d));
    }
    case Value::Kind::complex:
      return hash_combine(number(float_bits(v.as_complex().real())), number(float_bits(v.as_complex().imag())));
    case Value::Kind::big_integer: {
      const std::vector<std::uint8_t>& bytes = v.as_big_int().bytes;
      return static_cast<std::size_t>(keyed_hash(std::as_bytes(std::span(bytes.data(), bytes.size()))));
    }
    case Value::Kind::string: return text(v.as_string());
    case Value::Kind::bytes: return static_cast<std::size_t>(keyed_hash(std::span(v.as_bytes().data)));
    case Value::Kind::tuple: return items(0x7u, v.as_tuple());
    case Value::Kind::list: return items(0x11u, v.as_list());
    case Value::Kind::set: return items(v.as_set().frozen ? 0x13u : 0x17u, v.as_set().items);
    case Value::Kind::dict: {
      const Dict& dict = v.as_dict();
      std::size_t h = hash_combine(dict.ordered ? 0x1du : 0x1fu, hash_value(dict.attributes()));
      for (const auto& [key, value] : dict.items())
        h = hash_combine(hash_combine(h, hash_value(key)), hash_value(value));
      return h;
    }
    case Value::Kind::tensor: return hash_combine(tensor_meta(v.as_tensor()), v.is_parameter() ? 3u : 4u);
    case Value::Kind::storage: return hash_combine(tensor_meta(v.as_storage().tensor), text(v.as_storage().location));
    case Value::Kind::device: return device(v.as_device());
    case Value::Kind::dtype: return static_cast<std::size_t>(v.as_dtype()) + 0x100;
    case Value::Kind::global: return hash_combine(text(v.as_global().module), text(v.as_global().name));
    case Value::Kind::object: {
      const Object& object = v.as_object();
      std::size_t h = hash_combine(hash_combine(text(object.module), text(object.name)), object.newobj ? 5u : 6u);
      return hash_combine(hash_combine(h, hash_value(object.args)), hash_value(object.state));
    }
  }
  return 0;
}

TENSORFILE_ENTRY std::size_t hash_key(const Value& v) {
  const auto items = [](std::size_t seed, const List& list) {  // same_key compares these items as keys
    for (const auto& item : list) seed = hash_combine(seed, hash_key(item));
    return seed;
  };
  switch (v.kind()) {
    case Value::Kind::tuple: return items(0x7u, v.as_tuple());
    case Value::Kind::set: return items(v.as_set().frozen ? 0x13u : 0x17u, v.as_set().items);
    case Value::Kind::object:
      return static_cast<std::size_t>(
          keyed_hash(static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(v.identity()))));
    case Value::Kind::tensor:
    case Value::Kind::storage: {
      // What same_key compares, but bytes: a file can make many views of one storage, differing in shape alone.
      const Tensor& t = v.is_tensor() ? v.as_tensor() : v.as_storage().tensor;
      std::vector<std::int64_t> view{static_cast<std::int64_t>(t.dtype()), t.storage_offset()};
      view.insert(view.end(), t.sizes().begin(), t.sizes().end());
      view.insert(view.end(), t.strides().begin(), t.strides().end());
      return hash_combine(std::hash<const void*>{}(t.storage().data()),
                          static_cast<std::size_t>(keyed_hash(std::as_bytes(std::span(view)))));
    }
    default: return hash_value(v);
  }
}

TENSORFILE_ENTRY bool same_key(const Value& a, const Value& b) {
  if (a.kind() != b.kind()) return a == b;  // True == 1 == 1.0
  switch (a.kind()) {
    case Value::Kind::tensor:
    case Value::Kind::storage: {
      const Tensor& x = a.is_tensor() ? a.as_tensor() : a.as_storage().tensor;
      const Tensor& y = b.is_tensor() ? b.as_tensor() : b.as_storage().tensor;
      return a.is_parameter() == b.is_parameter() && x.storage().owner() == y.storage().owner() &&
             x.storage().data() == y.storage().data() && x.storage().size_bytes() == y.storage().size_bytes() &&
             x.dtype() == y.dtype() && x.storage_offset() == y.storage_offset() && x.sizes() == y.sizes() &&
             x.strides() == y.strides();
    }
    case Value::Kind::tuple:
    case Value::Kind::set: {
      if (a.is_set() && a.as_set().frozen != b.as_set().frozen) return false;
      const List& x = a.is_set() ? a.as_set().items : a.as_tuple();
      const List& y = b.is_set() ? b.as_set().items : b.as_tuple();
      if (x.size() != y.size()) return false;
      for (std::size_t i = 0; i < x.size(); ++i) {
        if (!same_key(x[i], y[i])) return false;
      }
      return true;
    }
    case Value::Kind::object: return a.identity() == b.identity();
    default: return a == b;
  }
}

}  // namespace detail

// Out of line (as every member that instantiates vector or index code), so that TUs which only include
// the header do not instantiate it.
TENSORFILE_ENTRY void List::pop_back() noexcept { items_.pop_back(); }
TENSORFILE_ENTRY void List::clear() noexcept { items_.clear(); }
TENSORFILE_ENTRY void Dict::clear() noexcept { index_ = {}; }
TENSORFILE_ENTRY void detail::ValueAccess::reserve_more(Dict& dict, std::size_t count) {
  dict.index_.reserve_more(count);
}
TENSORFILE_ENTRY void detail::ValueAccess::fit(Dict& dict) noexcept { dict.index_.shrink_to_fit(); }
TENSORFILE_ENTRY std::size_t detail::ValueAccess::room(const Dict& dict) noexcept {
  return dict.index_.items().capacity();
}
TENSORFILE_ENTRY std::span<Dict::Item> detail::ValueAccess::items(Dict& dict) noexcept {
  return dict.index_.mutable_items();
}

}  // namespace tensorfile

#endif  // TENSORFILE_DEFINITIONS_OF(core_value)