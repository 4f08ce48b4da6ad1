// SPDX-License-Identifier: MIT
// Recognises the bytes torch.save writes for one tensor, `_rebuild_tensor_v2/v3(...)`, so that the
// pickle machine can build the tensor directly instead of boxing a dozen intermediate values.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <string_view>

#include "tensorfile/core/tensor.hpp"
#include "tensorfile/core/value.hpp"
#include "tensorfile/formats/torch/detail/opcodes.hpp"
#include "tensorfile/formats/torch/detail/storage_types.hpp"

namespace tensorfile::detail {

/// One tensor call as the pickle spells it, read without side effects. Only the shape Python's
/// pickler gives a fresh tensor matches (see match_tensor_record); anything else is left to the
/// general machine, which gives the same result more slowly.
struct TensorRecord {
  static constexpr std::size_t max_puts = 8;
  static constexpr std::size_t max_dims = 64;  ///< longer size or stride tuples are left to the machine
  /// Most stack values (a size tuple's ints and a few more) or memo entries running the call's opcodes
  /// would add; the machine recognises calls only this far from its limits.
  static constexpr std::size_t max_growth = max_dims + 16;

  std::string_view key;                  ///< storage key, e.g. "0"
  std::string_view location;             ///< saved device tag, e.g. "cpu"
  DType storage_dtype = DType::Float32;  ///< from the storage class, e.g. FloatStorage
  std::int64_t numel = 0;                ///< storage element count
  std::int64_t offset = 0;               ///< storage offset of the view
  Shape sizes;
  Shape strides;
  bool requires_grad = false;
  std::optional<DType> dtype;                  ///< set for _rebuild_tensor_v3
  std::uint64_t storage_at = 0;                ///< offset of the BINPERSID opcode
  std::uint64_t call_at = 0;                   ///< offset of the final REDUCE
  std::uint64_t end = 0;                       ///< offset just past that REDUCE
  std::array<std::uint64_t, max_puts> puts{};  ///< memo indices written on the way, in order
  std::size_t put_count = 0;
};

/// Reads pickle bytes for the tensor record matcher; every read is bounds-checked and a failed
/// read simply means "no match". `memo(index)` returns the memo entry at index, or null.
template <class Memo>
class RecordCursor {
 public:
  RecordCursor(std::span<const std::byte> bytes, std::size_t pos, const Memo& memo)
      : bytes_(bytes), pos_(pos), memo_(memo) {}

  [[nodiscard]] std::size_t pos() const noexcept { return pos_; }
  /// Whether an opcode's argument could not be read as this matcher reads it (cut off, or a
  /// LONG1 wider than 8 bytes); a broken cursor never matches, whatever follows.
  [[nodiscard]] bool broken() const noexcept { return broken_; }
  bool op(Op code) {
    if (pos_ >= bytes_.size() || static_cast<Op>(bytes_[pos_]) != code) return false;
    ++pos_;
    return true;
  }
  /// An optional BINPUT/LONG_BINPUT after a value (a cut-off one fails the next read).
  bool optional_put(TensorRecord& r) {
    const auto index = index_op(Op::binput, Op::long_binput);
    if (!index) return true;
    if (r.put_count == TensorRecord::max_puts) return false;
    r.puts[r.put_count++] = *index;
    return true;
  }
  /// A str: BINUNICODE or SHORT_BINUNICODE (with its optional put), or a memo read of a str.
  bool text(std::string_view& out, TensorRecord& r) {
    std::uint64_t n = 0;
    if (op(Op::binunicode) ? le(4, n) : op(Op::short_binunicode) ? le(1, n) : false) {
      if (n > bytes_.size() - pos_) return fail();
      out = {reinterpret_cast<const char*>(bytes_.data() + pos_), static_cast<std::size_t>(n)};
      pos_ += static_cast<std::size_t>(n);
      return optional_put(r);
    }
    const Value* v = memo_read();
    if (v == nullptr || !v->is_string()) return false;
    out = v->as_string();
    return true;
  }
  /// A memo read of a global (storage classes and OrderedDict are memoized after their first use).
  const Global* global() {
    const Value* v = memo_read();
    return v != nullptr && v->is_global() ? &v->as_global() : nullptr;
  }
  /// A memo read of a dtype (torch 2.x's _rebuild_tensor_v3).
  std::optional<DType> dtype() {
    const Value* v = memo_read();
    if (v == nullptr || !v->is_dtype()) return std::nullopt;
    return v->as_dtype();
  }
  /// BININT1, BININT2, BININT or a LONG1 of at most 8 bytes; false without consuming anything
  /// when the next opcode is none of these.
  bool integer(std::int64_t& out) {
    std::uint64_t u = 0;
    if (op(Op::binint1)) {
      if (!le(1, u)) return false;
      out = static_cast<std::int64_t>(u);
    } else if (op(Op::binint2)) {
      if (!le(2, u)) return false;
      out = static_cast<std::int64_t>(u);
    } else if (op(Op::binint)) {
      if (!le(4, u)) return false;
      out = static_cast<std::int32_t>(static_cast<std::uint32_t>(u));
    } else if (op(Op::long1)) {
      std::uint64_t n = 0;
      if (!le(1, n)) return false;
      if (n > 8) return fail();
      if (!le(static_cast<std::size_t>(n), u)) return false;
      if (n > 0 && n < 8 && (u >> (8 * n - 1)) & 1u) u |= ~std::uint64_t{0} << (8 * n);  // sign-extend
      out = static_cast<std::int64_t>(u);
    } else {
      return false;
    }
    return true;
  }
  /// A tuple of ints: EMPTY_TUPLE, 1 to 3 ints and TUPLE1..3, or MARK, ints, TUPLE; then an optional put.
  bool int_tuple(Shape& out, TensorRecord& r) {
    out.clear();
    if (op(Op::empty_tuple)) return true;  // the empty tuple is never memoized
    const bool marked = op(Op::mark);
    // Read into a local array first: the shape is then allocated once, at its size.
    std::array<std::int64_t, TensorRecord::max_dims> values;
    std::size_t count = 0;
    while (count < values.size() && integer(values[count])) ++count;
    if (marked ? !op(Op::tuple) : !(count >= 1 && count <= 3 && op(tuple_op(count)))) return false;
    out.assign(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(count));
    return optional_put(r);
  }

 private:
  bool fail() {
    broken_ = true;
    return false;
  }
  bool le(std::size_t n, std::uint64_t& out) {
    if (n > bytes_.size() - pos_) return fail();
    out = 0;
    for (std::size_t i = 0; i < n; ++i)
      out |= std::uint64_t{std::to_integer<std::uint8_t>(bytes_[pos_ + i])} << (8 * i);
    pos_ += n;
    return true;
  }
  // `short_op` with a one-byte index or `long_op` with a four-byte one.
  std::optional<std::uint64_t> index_op(Op short_op, Op long_op) {
    std::uint64_t index = 0;
    if (op(short_op) ? le(1, index) : op(long_op) ? le(4, index) : false) return index;
    return std::nullopt;
  }
  const Value* memo_read() {
    const auto index = index_op(Op::binget, Op::long_binget);
    return index ? memo_(*index) : nullptr;
  }

  std::span<const std::byte> bytes_;
  std::size_t pos_;
  const Memo& memo_;
  bool broken_ = false;
};

/// Matches, from `pos` just past the MARK that opens the argument tuple of a `_rebuild_tensor_v2`
/// (`v3` for `_rebuild_tensor_v3`) call, the bytes Python's pickler writes for a tensor:
///   MARK MARK 'storage' <storage class> key location numel TUPLE [put] BINPERSID [put]
///   offset <sizes> <strides> NEWTRUE|NEWFALSE <OrderedDict> EMPTY_TUPLE REDUCE [put] [<dtype>] TUPLE [put] REDUCE
/// where strings, classes and dtypes may be memo reads. Returns nothing when the bytes differ in
/// any way (text opcodes, metadata dicts, memoized ints, MEMOIZE...): the caller then runs the
/// general machine. Validates only the shape; values are checked when the tensor is built.
/// `bytes` start at pickle offset `base`: the record's offsets are the pickle's.
template <class Memo>
std::optional<TensorRecord> match_tensor_record(std::span<const std::byte> bytes, std::size_t pos, std::uint64_t base,
                                                bool v3, const Memo& memo) {
  TensorRecord r;
  RecordCursor in(bytes, pos, memo);
  std::string_view tag;
  if (!in.op(Op::mark) || !in.text(tag, r) || tag != "storage") return std::nullopt;
  const Global* storage_class = in.global();
  // Compared as views: the literals' lengths are known, so no strlen per tensor.
  using namespace std::string_view_literals;
  if (storage_class == nullptr || std::string_view(storage_class->module) != "torch"sv) return std::nullopt;
  const auto storage_dtype = storage_type_dtype(storage_class->name);
  if (!storage_dtype) return std::nullopt;
  r.storage_dtype = *storage_dtype;
  if (!in.text(r.key, r) || !in.text(r.location, r) || !in.integer(r.numel) || r.numel < 0) return std::nullopt;
  if (!in.op(Op::tuple) || !in.optional_put(r)) return std::nullopt;
  r.storage_at = base + in.pos();
  if (!in.op(Op::binpersid) || !in.optional_put(r)) return std::nullopt;
  if (!in.integer(r.offset) || !in.int_tuple(r.sizes, r) || !in.int_tuple(r.strides, r)) return std::nullopt;
  if (in.op(Op::newtrue)) {
    r.requires_grad = true;
  } else if (!in.op(Op::newfalse)) {
    return std::nullopt;
  }
  const Global* hooks = in.global();
  if (hooks == nullptr || std::string_view(hooks->module) != "collections"sv ||
      std::string_view(hooks->name) != "OrderedDict"sv) {
    return std::nullopt;
  }
  if (!in.op(Op::empty_tuple) || !in.op(Op::reduce) || !in.optional_put(r)) return std::nullopt;
  if (v3 && !(r.dtype = in.dtype())) return std::nullopt;
  if (!in.op(Op::tuple) || !in.optional_put(r)) return std::nullopt;
  r.call_at = base + in.pos();
  if (!in.op(Op::reduce) || in.broken()) return std::nullopt;
  r.end = base + in.pos();
  return r;
}

}  // namespace tensorfile::detail
