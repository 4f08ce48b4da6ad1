// SPDX-License-Identifier: MIT
// The pickle machine: runs a pickle without ever executing anything; globals, calls and persistent
// ids go to hooks (TorchHooks in torch_hooks.hpp).
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <charconv>
#include <cstdint>
#include <cstring>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "tensorfile/core/error.hpp"
#include "tensorfile/core/value.hpp"
#include "tensorfile/detail/bytes/byte_order.hpp"
#include "tensorfile/detail/bytes/checked_math.hpp"
#include "tensorfile/detail/bytes/twos_complement.hpp"
#include "tensorfile/detail/text/hex.hpp"
#include "tensorfile/formats/torch/detail/opcodes.hpp"

namespace tensorfile::detail {

/// Bounds a pickle may not exceed; each breach is a LimitError.
struct PickleLimits {
  std::size_t max_depth = 1000;          ///< nesting of containers
  std::size_t max_memo = 1u << 22;       ///< memo entries
  std::size_t max_stack = 1u << 22;      ///< values on the stack
  std::size_t max_container = 1u << 26;  ///< items in one list, dict, set or tuple
  std::size_t max_int_bytes = 128;       ///< bytes of a LONG1/LONG4 integer
  /// Values in the tree, a shared container counted at each place it appears: containers shared level upon
  /// level describe in a few bytes a tree that every walk over it (select, printing, clone) visits exponentially.
  std::uint64_t max_tree_size = std::uint64_t{1} << 27;
  /// Bytes of str values copied by memo reads, memo writes and DUP: a str is held by value, so a long one read back
  /// k times (2 bytes a GET) is k copies.
  std::uint64_t max_copied_text = std::uint64_t{1} << 28;
};

/// A pickle that is not in memory: `read(offset, out)` fills `out` with the pickle's bytes from `offset` (throwing
/// on failure); `size` is the pickle's length. The machine holds a window of it at a time.
struct PickleSource {
  std::uint64_t size = 0;
  std::function<void(std::uint64_t offset, std::span<std::byte> out)> read;
};

/// What the machine asks of its user (the torch layer). Every call gets the opcode's byte offset.
template <class H>
concept pickle_hooks = requires(H& h, const Value& v, Value owned, std::string_view s, std::uint64_t at) {
  { h.find_class(s, s, at) } -> std::same_as<Value>;        // GLOBAL / STACK_GLOBAL
  { h.reduce(v, owned, at) } -> std::same_as<Value>;        // REDUCE: callable, args tuple
  { h.new_object(v, owned, at) } -> std::same_as<Value>;    // NEWOBJ: class, args tuple
  { h.build(v, owned, at) } -> std::same_as<Value>;         // BUILD: object, state -> object
  { h.persistent_load(owned, at) } -> std::same_as<Value>;  // BINPERSID
};

/// Hooks that may also recognise the bytes of a whole call (`callable MARK ... REDUCE`) and build
/// its result directly: recognize_call reads without side effects (from `pos` in `bytes`, which start at
/// pickle offset `base`; the offsets it returns are the pickle's) and returns the memo indices the
/// bytes write; finish_call builds the result. The machine falls back to running the opcodes
/// whenever recognition fails or one of those memo entries is read later.
template <class H>
concept call_recognizing_hooks = requires(H& h, const Value& v, std::span<const std::byte> bytes,
                                          const Value* (*memo)(std::uint64_t)) {
  typename H::RecognizedCall;
  { H::RecognizedCall::max_growth } -> std::convertible_to<std::size_t>;  // stack values or memo entries, at most
  {
    h.recognize_call(v, bytes, std::size_t{}, std::uint64_t{}, memo)
    } -> std::same_as<std::optional<typename H::RecognizedCall>>;
  { h.finish_call(std::declval<typename H::RecognizedCall&>()) } -> std::same_as<Value>;
};

/// Runs one pickle (protocols 0 to 5, binary opcodes and the common text ones) to its STOP.
template <pickle_hooks Hooks>
class PickleMachine {
 public:
  /// Bytes read from `window_bytes` at a time when the pickle comes from a PickleSource.
  static constexpr std::size_t default_window = std::size_t{64} << 10;

  /// A machine over a pickle in memory (borrowed for the machine's life).
  PickleMachine(std::span<const std::byte> bytes, Hooks& hooks, ErrorLocation where, PickleLimits limits = {})
      : window_(bytes), size_(bytes.size()), hooks_(hooks), where_(std::move(where)), limits_(limits) {}
  /// A machine that reads its pickle from `source`, a window of about `window_bytes` at a time (more when one
  /// opcode needs more), so that a large pickle is never in memory whole. Results and errors are those of the
  /// same bytes in memory, but for the source's own errors.
  PickleMachine(PickleSource source, Hooks& hooks, ErrorLocation where, PickleLimits limits = {},
                std::size_t window_bytes = default_window)
      : size_(source.size), source_(std::move(source.read)), window_bytes_(std::max<std::size_t>(window_bytes, 1)),
        hooks_(hooks), where_(std::move(where)), limits_(limits) {}

  /// Runs from `start` to the STOP opcode and returns the one value left; `end()` then gives the
  /// offset just past STOP (the legacy format holds several pickles back to back).
  [[nodiscard]] Value run(std::size_t start = 0) {
    scan_memo_reads(start);
    pos_ = start;
    while (true) {
      op_at_ = pos_;
      keep_from_ = pos_;
      const auto op = static_cast<std::uint8_t>(read_byte());
      if (op == static_cast<std::uint8_t>(Op::stop)) break;
      step(op);
    }
    if (!marks_.empty()) fail("MARK without a matching end at STOP");
    if (stack_.size() != 1) {
      fail("STOP needs exactly one value on the stack; expected 1, got " + std::to_string(stack_.size()));
    }
    Value result = std::move(stack_.back());
    if (sized_dict_.is_dict()) {
      Dict& sized = ValueAccess::dict(sized_dict_);
      if (ValueAccess::room(sized) > sized.size() + sized.size() / 4) ValueAccess::fit(sized);
      sized_dict_ = Value();
    }
    stack_.clear();
    memo_size_ = 0;
    memo_slots_.clear();
    memo_values_.clear();
    sparse_memo_.clear();
    return result;
  }

  /// The number of items a large dict of this pickle is expected to end with (a state dict: about one item per
  /// storage record). The first dict that receives a full batch of Python's pickler gets room for that many at
  /// once, rather than growing batch by batch (each growth moves its items and table into fresh memory). Once per
  /// machine, so a file cannot make it reserve more than once; at STOP, room that growth would not have left
  /// (more than a quarter over its size: another dict held some of the records) is given back.
  void expect_large_dict(std::size_t items) noexcept { large_dict_items_ = items; }

  /// Offset just past the STOP opcode of the last run.
  [[nodiscard]] std::size_t end() const noexcept { return static_cast<std::size_t>(pos_); }

  /// Error location of the opcode being run (for hooks that fail).
  [[nodiscard]] ErrorLocation location(std::uint64_t offset) const {
    ErrorLocation at = where_;
    at.offset = offset;
    return at;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const { throw FormatError(what, location(op_at_)); }
  [[noreturn]] void over(const std::string& what) const { throw LimitError(what, location(op_at_)); }

  // ---- reading -------------------------------------------------------------------------------
  // Offsets are the pickle's; window_ holds its bytes from base_. With a source, a view handed out lasts until the
  // next read (every opcode uses its argument before reading on); a refill keeps the bytes from keep_from_ (the
  // opcode's start, or the scan's position) so that a line read across a refill stays whole.
  [[nodiscard]] std::uint64_t window_end() const noexcept { return base_ + window_.size(); }
  [[nodiscard]] std::uint64_t remaining(std::uint64_t at) const noexcept { return size_ - at; }
  // Whether [at, at + n) is in the window after reading it in where needed; false past the pickle's end.
  bool have(std::uint64_t at, std::uint64_t n) {
    const std::uint64_t in_window = at - base_;  // wraps past the window's size when at < base_
    if (in_window <= window_.size() && n <= window_.size() - in_window) return true;
    if (!source_ || n > size_ - std::min(at, size_)) return false;
    refill(at, n);
    return true;
  }
  // Makes the window [keep, at + n), keep = min(keep_from_, at), at least window_bytes_ long where the pickle has
  // that many bytes left: the bytes it shares with the current window move to the buffer's front, the rest are read.
  // Out of line: the rare path, kept from growing every have() it would be inlined into.
  [[gnu::noinline]] void refill(std::uint64_t at, std::uint64_t n) {
    const std::uint64_t keep = std::min(keep_from_, at);
    const auto length =
        static_cast<std::size_t>(std::min(size_ - keep, std::max<std::uint64_t>(at + n - keep, window_bytes_)));
    std::size_t kept = 0;
    if (keep >= base_ && keep < window_end()) {
      kept = static_cast<std::size_t>(window_end() - keep);
      std::memmove(buffer_.data(), buffer_.data() + (keep - base_), kept);
    }
    buffer_.resize(length);
    source_(keep + kept, std::span(buffer_).subspan(kept));
    window_ = buffer_;
    base_ = keep;
  }
  [[nodiscard]] std::byte byte_at(std::uint64_t at) const noexcept {
    return window_[static_cast<std::size_t>(at - base_)];
  }

  std::byte read_byte() {
    if (!have(pos_, 1)) fail("pickle ends before its STOP opcode");
    return byte_at(pos_++);
  }
  std::span<const std::byte> read_span(std::uint64_t n) {
    if (!have(pos_, n)) {
      fail("pickle ends inside an opcode argument; expected " + std::to_string(n) + " bytes, got " +
           std::to_string(remaining(pos_)));
    }
    auto out = window_.subspan(static_cast<std::size_t>(pos_ - base_), static_cast<std::size_t>(n));
    pos_ += n;
    return out;
  }
  template <class T>
  T read_le() {
    const auto raw = read_span(sizeof(T));
    T v;
    std::memcpy(&v, raw.data(), sizeof(T));
    if constexpr (std::endian::native == std::endian::big) v = detail::byteswap(v);
    return v;
  }
  std::string_view read_text(std::uint64_t n) {
    const auto raw = read_span(n);
    return {reinterpret_cast<const char*>(raw.data()), raw.size()};
  }
  std::string_view read_line() {
    const std::uint64_t start = pos_;
    while (have(pos_, 1) && byte_at(pos_) != std::byte{'\n'}) ++pos_;
    if (pos_ >= size_) fail("pickle ends inside a text argument; expected a newline");
    ++pos_;
    return {reinterpret_cast<const char*>(window_.data() + (start - base_)),
            static_cast<std::size_t>(pos_ - 1 - start)};
  }

  // ---- memo scan: which memo indices does any GET read? ---------------------------------------
  // Per byte: the opcode and its argument's bytes when the scan only skips it (a run opcode with a fixed-width
  // argument that reads no memo entry), else 0; and whether it writes a memo entry.
  static constexpr std::array<std::uint8_t, 256> scan_skips = [] {
    std::array<std::uint8_t, 256> skips{};
    for (std::size_t i = 0; i < skips.size(); ++i) {
      const OpInfo& info = op_info[i];
      if (!info.runs || i == static_cast<std::uint8_t>(Op::stop) || info.memo == OpMemo::read) continue;
      switch (info.arg) {
        case OpArg::none: skips[i] = 1; break;
        case OpArg::fixed1: skips[i] = 2; break;
        case OpArg::fixed2: skips[i] = 3; break;
        case OpArg::fixed4: skips[i] = 5; break;
        case OpArg::fixed8: skips[i] = 9; break;
        default: break;
      }
    }
    return skips;
  }();

  bool read_anywhere(std::uint64_t index) const noexcept {
    return reads_unknown_ || (index / 64 < read_words_.size() &&
                              (read_words_[static_cast<std::size_t>(index / 64)] >> (index % 64)) & 1u);
  }
  // Walks the opcodes from `start` to STOP without running them, recording each GET's index. Any
  // surprise (an opcode the machine does not run, a truncated argument, a huge index) keeps every memo entry instead;
  // the run itself then reports the problem. memo_get refuses an index the scan did not see, so a
  // scan that ever disagreed with the run would fail loudly rather than yield a placeholder.
  void scan_memo_reads(std::size_t start) {
    constexpr std::uint64_t dense_limit = std::uint64_t{1} << 24;
    read_words_.clear();
    read_rank_.clear();
    memo_size_ = 0;
    memo_slots_.clear();
    reads_unknown_ = true;
    std::uint64_t at = start;
    const auto skip = [&](std::uint64_t n) {
      if (n > remaining(at)) return false;
      at += n;
      return true;
    };
    const auto le = [&](std::size_t n, std::uint64_t& out) {
      if (!have(at, n)) return false;
      out = 0;
      for (std::size_t i = 0; i < n; ++i)
        out |= std::uint64_t{std::to_integer<std::uint8_t>(byte_at(at + i))} << (8 * i);
      at += n;
      return true;
    };
    const auto line = [&](std::string_view& out) {
      const std::uint64_t begin = at;
      while (have(at, 1) && byte_at(at) != std::byte{'\n'}) ++at;
      if (at >= size_) return false;
      out = {reinterpret_cast<const char*>(window_.data() + (begin - base_)), static_cast<std::size_t>(at - begin)};
      ++at;
      return true;
    };
    const auto note = [&](std::uint64_t index) {
      if (index >= dense_limit) return false;
      const auto word = static_cast<std::size_t>(index / 64);
      if (word >= read_words_.size()) read_words_.resize(word + 1);
      read_words_[word] |= std::uint64_t{1} << (index % 64);
      return true;
    };
    std::uint64_t n = 0;
    std::string_view text;
    std::size_t reads = 0;  // distinct indices read back (counted at STOP)
    while (at < size_) {
      keep_from_ = at;  // the scan keeps nothing behind the opcode it reads
      if (!have(at, 1)) return;
      // Most opcodes only need skipping: one table load and a well-predicted branch rather than a dispatch, in a
      // loop over the window. A skip cut off by the end leaves the outer loop with reads_unknown_ set, as the
      // checked skips below do.
      const std::byte* const window = window_.data();
      const std::size_t window_size = window_.size();
      auto in_window = static_cast<std::size_t>(at - base_);
      std::uint8_t byte = std::to_integer<std::uint8_t>(window[in_window]);
      for (std::uint8_t width = scan_skips[byte]; width != 0; width = scan_skips[byte]) {
        in_window += width;
        if (in_window >= window_size) break;
        byte = std::to_integer<std::uint8_t>(window[in_window]);
      }
      at = base_ + in_window;
      if (in_window >= window_size) continue;
      keep_from_ = at;
      ++at;
      bool ok = true;
      std::int64_t text_index = -1;
      // One dispatch on (argument layout, memo effect); every width below is a constant.
      switch (op_shapes[byte]) {
        case op_shape_stop:
          reads_unknown_ = false;
          // A slot per index read back, found by its rank among them: the GETs are opcodes in the file.
          read_rank_.resize(read_words_.size());
          for (std::size_t i = 0; i < read_words_.size(); ++i) {
            read_rank_[i] = static_cast<std::uint32_t>(reads);
            reads += static_cast<std::size_t>(std::popcount(read_words_[i]));
          }
          memo_slots_.assign(reads, 0);
          return;
        case op_shape(OpArg::none, OpMemo::none):
        case op_shape(OpArg::none, OpMemo::write): break;
        case op_shape(OpArg::fixed1, OpMemo::none):
        case op_shape(OpArg::fixed1, OpMemo::write): ok = skip(1); break;
        case op_shape(OpArg::fixed1, OpMemo::read): ok = le(1, n) && note(n); break;
        case op_shape(OpArg::fixed2, OpMemo::none): ok = skip(2); break;
        case op_shape(OpArg::fixed4, OpMemo::none):
        case op_shape(OpArg::fixed4, OpMemo::write): ok = skip(4); break;
        case op_shape(OpArg::fixed4, OpMemo::read): ok = le(4, n) && note(n); break;
        case op_shape(OpArg::fixed8, OpMemo::none): ok = skip(8); break;
        case op_shape(OpArg::counted1, OpMemo::none): ok = le(1, n) && skip(n); break;
        case op_shape(OpArg::counted4, OpMemo::none): ok = le(4, n) && skip(n); break;
        case op_shape(OpArg::counted8, OpMemo::none): ok = le(8, n) && skip(n); break;
        case op_shape(OpArg::counted_signed4, OpMemo::none): ok = le(4, n) && n < 0x80000000u && skip(n); break;
        case op_shape(OpArg::line, OpMemo::none):
        case op_shape(OpArg::line, OpMemo::write): ok = line(text); break;
        case op_shape(OpArg::line, OpMemo::read):
          ok = line(text) && std::from_chars(text.data(), text.data() + text.size(), text_index).ec == std::errc{} &&
               text_index >= 0 && note(static_cast<std::uint64_t>(text_index));
          break;
        case op_shape(OpArg::two_lines, OpMemo::none): ok = line(text) && line(text); break;
        default: ok = false;  // not run by the machine, or a shape no opcode has
      }
      if (!ok) return;
    }
  }

  // ---- stack ---------------------------------------------------------------------------------
  void push(Value v) {
    if (stack_.size() >= limits_.max_stack)
      over("pickle stack exceeds " + std::to_string(limits_.max_stack) + " values");
    stack_.push_back(std::move(v));
  }
  Value pop() {
    if (stack_.size() <= floor()) fail("pickle stack underflow");
    Value v = std::move(stack_.back());
    stack_.pop_back();
    return v;
  }
  Value& top() {
    if (stack_.size() <= floor()) fail("pickle stack underflow");
    return stack_.back();
  }
  std::size_t floor() const { return marks_.empty() ? 0 : marks_.back(); }
  List pop_items(std::size_t n) {
    if (stack_.size() - floor() < n) fail("pickle stack underflow");
    List items(std::make_move_iterator(stack_.end() - static_cast<std::ptrdiff_t>(n)),
               std::make_move_iterator(stack_.end()));
    stack_.resize(stack_.size() - n);
    return items;
  }
  // Closes the innermost MARK and returns its stack position: the items above it stay on the stack for the
  // caller to use in place, and then to drop with stack_.resize(mark).
  std::size_t close_mark() {
    if (marks_.empty()) fail("opcode needs a MARK but none is open");
    const std::size_t mark = marks_.back();
    marks_.pop_back();
    return mark;
  }
  List pop_mark() {
    const std::size_t mark = close_mark();
    List items(std::make_move_iterator(stack_.begin() + static_cast<std::ptrdiff_t>(mark)),
               std::make_move_iterator(stack_.end()));
    stack_.resize(mark);
    return items;
  }

  // ---- recognized calls ----------------------------------------------------------------------
  // At a MARK after a global: lets the hooks read the whole call. Never near a limit, so that the
  // general path's limit errors stay exactly where they were: running the call's opcodes would
  // push at most `margin` values or memo entries and read ints of at most 8 bytes.
  bool recognized_call() {
    if (stack_.size() <= floor() || !stack_.back().is_global()) return false;
    constexpr std::size_t margin = Hooks::RecognizedCall::max_growth;
    if (stack_.size() + margin > limits_.max_stack || memo_size_ + sparse_memo_.size() + margin > limits_.max_memo ||
        limits_.max_depth < 2 || limits_.max_container < margin || limits_.max_int_bytes < 8) {
      return false;
    }
    const auto memo = [this](std::uint64_t index) -> const Value* {
      if (index < memo_size_) return &memo_entry(index);
      auto it = sparse_memo_.find(index);
      return it == sparse_memo_.end() ? nullptr : &it->second;
    };
    // A whole call in view where the pickle has it (a tensor's is a few hundred bytes): the hooks read no further.
    (void)have(pos_, std::min<std::uint64_t>(remaining(pos_), call_lookahead));
    auto call = hooks_.recognize_call(stack_.back(), window_, static_cast<std::size_t>(pos_ - base_), base_, memo);
    if (!call) return false;
    for (std::size_t i = 0; i < call->put_count; ++i) {
      if (read_anywhere(call->puts[i])) return false;
    }
    // finish_call first: the call's strings may be views into memo entries, which memo_store may move.
    Value result = hooks_.finish_call(*call);
    for (std::size_t i = 0; i < call->put_count; ++i) memo_forget(call->puts[i]);
    stack_.back() = made(std::move(result));
    pos_ = call->end;
    return true;
  }

  // ---- memo ----------------------------------------------------------------------------------
  // Python's pickler memoizes nearly every object, yet torch files read back only a few (globals,
  // repeated strings). Values whose index no GET names get a None placeholder, so transient tuples
  // die as soon as they are used instead of living until the end of the load.
  void memo_put(std::uint64_t index) {
    const Value& stored = top();  // checks the stack even when only a placeholder is kept
    if (read_anywhere(index)) {
      charge_copy(stored);
      memo_store(index, stored);
    } else {
      memo_forget(index);
    }
  }
  // memo_store(index, placeholder_), with the common case first: the next dense index.
  void memo_forget(std::uint64_t index) {
    if (index == memo_size_ && memo_size_ < limits_.max_memo) {
      grow_memo();
    } else {
      memo_store(index, placeholder_);
    }
  }
  void memo_store(std::uint64_t index, const Value& v) {
    if (index < memo_size_) {
      set_memo_entry(index, v);
    } else if (index == memo_size_) {
      if (memo_size_ >= limits_.max_memo) over("pickle memo exceeds " + std::to_string(limits_.max_memo) + " entries");
      grow_memo();
      set_memo_entry(index, v);
    } else {
      if (sparse_memo_.size() + memo_size_ >= limits_.max_memo) {
        over("pickle memo exceeds " + std::to_string(limits_.max_memo) + " entries");
      }
      sparse_memo_[index] = v;
    }
  }
  void memo_get(std::uint64_t index) {
    if (!read_anywhere(index))
      fail("memo index " + std::to_string(index) + " was not seen by the memo scan (internal error)");
    if (index < memo_size_) return push_copy(memo_entry(index));
    if (auto it = sparse_memo_.find(index); it != sparse_memo_.end()) return push_copy(it->second);
    fail("memo index " + std::to_string(index) + " was never stored");
  }
  // A copy of a str copies its bytes; the other kinds copy a scalar or share a box.
  void charge_copy(const Value& v) {
    if (!v.is_string()) return;
    copied_text_ += v.as_string().size();
    if (copied_text_ > limits_.max_copied_text) {
      over("str values copied by the memo and DUP exceed " + std::to_string(limits_.max_copied_text) +
           " bytes (a str read back k times is k copies)");
    }
  }
  void push_copy(const Value& v) {
    charge_copy(v);
    push(v);
  }

  // One more dense index (a slot of its own only when the scan could not say which are read back).
  void grow_memo() {
    ++memo_size_;
    if (reads_unknown_) memo_slots_.push_back(0);
  }
  // The slot of a dense index that is read back: its rank among those indices (its index when unknown).
  [[nodiscard]] std::size_t memo_slot(std::uint64_t index) const noexcept {
    if (reads_unknown_) return static_cast<std::size_t>(index);
    const auto word = static_cast<std::size_t>(index / 64);
    const std::uint64_t below = read_words_[word] & ((std::uint64_t{1} << (index % 64)) - 1);
    return read_rank_[word] + static_cast<std::size_t>(std::popcount(below));
  }
  // The dense memo entry at `index`: the placeholder, or the Value it holds.
  const Value& memo_entry(std::uint64_t index) const noexcept {
    if (!read_anywhere(index)) return placeholder_;
    const std::uint32_t slot = memo_slots_[memo_slot(index)];
    return slot == 0 ? placeholder_ : memo_values_[slot - 1];
  }
  void set_memo_entry(std::uint64_t index, const Value& v) {
    // An index nothing reads back keeps no slot: memo_put gives it the placeholder alone.
    if (!read_anywhere(index)) return;
    std::uint32_t& slot = memo_slots_[memo_slot(index)];
    if (&v == &placeholder_) {
      slot = 0;  // the value it held stays unused: values are bounded by the puts, as entries are
    } else if (slot != 0) {
      memo_values_[slot - 1] = v;
    } else {
      if (memo_values_.size() >= UINT32_MAX) over("pickle memo exceeds " + std::to_string(UINT32_MAX) + " entries");
      memo_values_.push_back(v);
      slot = static_cast<std::uint32_t>(memo_values_.size());
    }
  }

  // ---- structure checks: no cycles, bounded depth, bounded sizes ---------------------------
  // Every container carries its depth (1 + its deepest child's) and a sealed flag; a container's
  // children all exist before it, so depths are computed once, bottom up.
  static bool is_mutable_container(const Value& v) noexcept {
    const auto k = v.kind();
    return k == Value::Kind::list || k == Value::Kind::dict || k == Value::Kind::set || k == Value::Kind::object;
  }
  static bool is_container(const Value& v) noexcept {
    return v.kind() == Value::Kind::tuple || is_mutable_container(v);
  }

  static std::size_t depth_of(const Value& v) noexcept {
    const Nesting* nesting = nesting_of(v);
    return nesting ? nesting->depth : 0;
  }
  static std::uint64_t reach_of(const Value& v) noexcept {
    const Nesting* nesting = nesting_of(v);
    return nesting ? nesting->reach : 1;
  }
  // Sets a container's reach (saturating), within max_tree_size.
  void record_reach(const Value& container, std::uint64_t base, std::uint64_t more) {
    const std::uint64_t reach = checked_add_u64(base, more).value_or(UINT64_MAX);
    if (reach > limits_.max_tree_size) {
      over("the object tree exceeds " + std::to_string(limits_.max_tree_size) +
           " values (a container shared by several others counts at each place)");
    }
    nesting_of(container)->reach = reach;
  }
  void record_depth(const Value& container, std::size_t depth) {
    if (depth > limits_.max_depth) over("nesting exceeds " + std::to_string(limits_.max_depth) + " levels");
    Nesting& nesting = *nesting_of(container);
    nesting.depth = std::max(nesting.depth, static_cast<std::uint32_t>(depth));
  }
  static void seal(const Value& child) noexcept {
    if (is_mutable_container(child)) nesting_of(child)->sealed = true;
  }
  // Records a container made by an opcode or a hook; its depth comes from its direct children.
  void adopt(const Value& v) {
    if (!is_container(v)) return;
    std::size_t depth = 1;
    std::uint64_t reach = 0;  // the children's
    const auto child = [&](const Value& c) {
      reach = checked_add_u64(reach, reach_of(c)).value_or(UINT64_MAX);
      if (!is_container(c)) return;
      depth = std::max(depth, depth_of(c) + 1);
      seal(c);
    };
    switch (v.kind()) {
      case Value::Kind::tuple:
        for (const auto& c : v.as_tuple()) child(c);
        break;
      case Value::Kind::list:
        for (const auto& c : v.as_list()) child(c);
        break;
      case Value::Kind::set:
        for (const auto& c : v.as_set().items) child(c);
        break;
      case Value::Kind::dict:
        for (const auto& [k, c] : v.as_dict()) {
          child(k);
          child(c);
        }
        child(v.as_dict().attributes());
        break;
      case Value::Kind::object:
        child(v.as_object().args);
        child(v.as_object().state);
        break;
      default: break;
    }
    if (depth > 1) record_depth(v, depth);
    record_reach(v, 1, reach);
  }
  // Before items go into `target`: a container already placed inside another one is sealed, so
  // no cycle can form and recorded depths stay true (Python's pickler fills containers first).
  void check_open(const Value& target) const {
    if (nesting_of(target)->sealed) {
      fail("pickle modifies a " + std::string(Value::kind_name(target.kind())) +
           " after placing it in another container");
    }
  }
  void insert_check(const Value& target, const Value& child, std::size_t new_size) {
    if (new_size > limits_.max_container) over("container exceeds " + std::to_string(limits_.max_container) + " items");
    record_reach(target, reach_of(target), reach_of(child));
    if (!is_container(child)) return;
    if (child.identity() == target.identity()) {
      fail("pickle puts a " + std::string(Value::kind_name(target.kind())) + " inside itself");
    }
    record_depth(target, depth_of(child) + 1);
    seal(child);
  }
  Value made(Value v) {
    adopt(v);
    return v;
  }

  // As Python: mutable containers are not hashable, so they are never keys or set items (a frozenset is; it is
  // sealed once it is one, so it cannot change under the index).
  void check_hashable(const Value& v, const char* role) const {
    if (is_mutable_container(v) && !v.is_object() && !(v.is_set() && v.as_set().frozen)) {
      fail(std::string(role) + " is an unhashable " + std::string(Value::kind_name(v.kind())));
    }
  }

  // ---- opcodes -------------------------------------------------------------------------------
  void append_items(Value& target, List items) {
    if (!target.is_list()) fail("APPEND on a " + std::string(Value::kind_name(target.kind())) + "; expected a list");
    check_open(target);
    std::vector<Value>& list = ValueAccess::list_items(target);  // insert_check below refuses cycles
    for (auto& item : items) {
      insert_check(target, item, list.size() + 1);
      list.push_back(std::move(item));
    }
  }
  void set_items(Value& target, std::span<Value> items) {
    if (!target.is_dict()) fail("SETITEM on a " + std::string(Value::kind_name(target.kind())) + "; expected a dict");
    if (items.size() % 2 != 0) fail("SETITEMS needs key/value pairs; got an odd number of items");
    check_open(target);
    Dict& dict = ValueAccess::dict(target);  // insert_check below refuses cycles
    // Room for the batch at once (Python's pickler writes up to 1,000 pairs per SETITEMS): a state dict's item
    // vector ends near its size, not at the next power of two, and is moved fewer times. A first full batch into
    // an empty dict means more follow: room for the expected size then (expect_large_dict).
    std::size_t room = items.size() / 2;
    if (room == python_batch_pairs && dict.size() == 0 && large_dict_items_ > room) {
      // No more pairs than the rest of the pickle could hold (two bytes each at least): a central directory of
      // many records with a small pickle reserves no more than that pickle could have grown the dict to.
      room = static_cast<std::size_t>(
          std::min<std::uint64_t>(std::exchange(large_dict_items_, 0), room + remaining(pos_) / 2));
      sized_dict_ = target;
    }
    ValueAccess::reserve_more(dict, room);
    for (std::size_t i = 0; i < items.size(); i += 2) {
      check_hashable(items[i], "dict key");
      insert_check(target, items[i], dict.size() + 1);
      insert_check(target, items[i + 1], dict.size() + 1);
      ValueAccess::set(dict, std::move(items[i]), std::move(items[i + 1]));
    }
  }
  void add_items(Value& target, List items) {
    if (!target.is_set() || target.as_set().frozen)
      fail("ADDITEMS on a " + std::string(Value::kind_name(target.kind())) + "; expected a set");
    check_open(target);
    for (auto& item : items) {
      check_hashable(item, "set item");
      std::vector<Value>& set_items = ValueAccess::set_items(target);  // insert_check refuses cycles
      insert_check(target, item, set_items.size() + 1);
      set_items.push_back(std::move(item));
    }
  }
  Value make_tuple(List items) {
    if (items.size() > limits_.max_container)
      over("container exceeds " + std::to_string(limits_.max_container) + " items");
    return made(Value::tuple(std::move(items)));
  }
  Value make_int_from_le(std::span<const std::byte> raw) {
    if (raw.size() > limits_.max_int_bytes) {
      over("integer of " + std::to_string(raw.size()) + " bytes exceeds " + std::to_string(limits_.max_int_bytes));
    }
    if (raw.size() <= 8) {
      std::uint64_t u = 0;
      for (std::size_t i = 0; i < raw.size(); ++i) u |= std::uint64_t{std::to_integer<std::uint8_t>(raw[i])} << (8 * i);
      if (!raw.empty() && raw.size() < 8 && (std::to_integer<std::uint8_t>(raw.back()) & 0x80u)) {
        u |= ~std::uint64_t{0} << (8 * raw.size());  // sign-extend
      }
      return Value(static_cast<std::int64_t>(u));
    }
    BigInt big;
    big.bytes.resize(raw.size());
    std::memcpy(big.bytes.data(), raw.data(), raw.size());
    // Normalise: drop redundant sign bytes; a value that fits 64 bits becomes a plain int.
    trim_sign_bytes(big.bytes);
    if (big.bytes.size() <= 8) return make_int_from_le(std::as_bytes(std::span(big.bytes)));
    return Value(std::move(big));
  }
  Value parse_text_int(std::string_view line) {
    if (line == "00") return Value(false);
    if (line == "01") return Value(true);
    if (!line.empty() && line.back() == 'L') line.remove_suffix(1);
    std::int64_t v = 0;
    const auto [end, ec] = std::from_chars(line.data(), line.data() + line.size(), v);
    if (ec != std::errc{} || end != line.data() + line.size())
      fail("invalid text integer \"" + std::string(line) + "\"");
    return Value(v);
  }

  void step(std::uint8_t op) {
    switch (static_cast<Op>(op)) {
      case Op::proto: {
        const auto version = std::to_integer<int>(read_byte());
        if (version > 5) fail("unsupported pickle protocol " + std::to_string(version) + "; expected 0 to 5");
        return;
      }
      case Op::frame: {  // a length hint; the frame's opcodes follow inline
        const auto length = read_le<std::uint64_t>();
        if (length > remaining(pos_)) {
          fail("FRAME of " + std::to_string(length) + " bytes runs past the pickle's end; expected at most " +
               std::to_string(remaining(pos_)));
        }
        return;
      }
      case Op::mark:
        if constexpr (call_recognizing_hooks<Hooks>) {
          if (recognized_call()) return;
        }
        marks_.push_back(stack_.size());
        return;
      case Op::pop: (void)pop(); return;
      case Op::pop_mark: (void)pop_mark(); return;
      case Op::dup: push_copy(top()); return;
      case Op::none: push(Value()); return;
      case Op::newtrue: push(Value(true)); return;
      case Op::newfalse: push(Value(false)); return;
      case Op::binint: push(Value(std::int64_t{read_le<std::int32_t>()})); return;
      case Op::binint1: push(Value(std::int64_t{read_le<std::uint8_t>()})); return;
      case Op::binint2: push(Value(std::int64_t{read_le<std::uint16_t>()})); return;
      case Op::long1: {
        const auto n = read_le<std::uint8_t>();
        push(make_int_from_le(read_span(n)));
        return;
      }
      case Op::long4: {
        const auto n = read_le<std::int32_t>();
        if (n < 0) fail("LONG4 with negative length " + std::to_string(n));
        push(make_int_from_le(read_span(static_cast<std::uint64_t>(n))));
        return;
      }
      case Op::integer: push(parse_text_int(read_line())); return;
      case Op::long_text: push(parse_text_int(read_line())); return;
      case Op::binfloat: {  // a big-endian double
        auto bits = read_le<std::uint64_t>();
        if constexpr (std::endian::native == std::endian::little) bits = detail::byteswap(bits);
        push(Value(std::bit_cast<double>(bits)));
        return;
      }
      case Op::floating: {
        const std::string text(read_line());
        char* end = nullptr;
        const double v = std::strtod(text.c_str(), &end);
        if (end != text.c_str() + text.size()) fail("invalid text float \"" + text + "\"");
        push(Value(v));
        return;
      }
      case Op::binunicode: push(Value(read_text(read_le<std::uint32_t>()))); return;
      case Op::short_binunicode: push(Value(read_text(read_le<std::uint8_t>()))); return;
      case Op::binunicode8: push(Value(read_text(read_le<std::uint64_t>()))); return;
      case Op::binstring: {  // (Python 2 str, read as text like torch's encoding='utf-8')
        const auto n = read_le<std::int32_t>();
        if (n < 0) fail("BINSTRING with negative length " + std::to_string(n));
        push(Value(read_text(static_cast<std::uint64_t>(n))));
        return;
      }
      case Op::short_binstring: push(Value(read_text(read_le<std::uint8_t>()))); return;
      case Op::binbytes: push_bytes(read_le<std::uint32_t>()); return;
      case Op::short_binbytes: push_bytes(read_le<std::uint8_t>()); return;
      case Op::binbytes8: push_bytes(read_le<std::uint64_t>()); return;
      case Op::bytearray8: push_bytes(read_le<std::uint64_t>()); return;
      case Op::empty_tuple: push(empty_tuple_); return;  // one shared empty tuple, as in Python
      case Op::tuple: push(make_tuple(pop_mark())); return;
      case Op::tuple1: push(make_tuple(pop_items(1))); return;
      case Op::tuple2: push(make_tuple(pop_items(2))); return;
      case Op::tuple3: push(make_tuple(pop_items(3))); return;
      case Op::empty_list: push(made(Value(List{}))); return;
      case Op::list: {
        Value list = made(Value(List{}));
        append_items(list, pop_mark());
        push(std::move(list));
        return;
      }
      case Op::append: {
        Value item = pop();
        append_items(top(), List{std::move(item)});
        return;
      }
      case Op::appends: {
        List items = pop_mark();
        append_items(top(), std::move(items));
        return;
      }
      case Op::empty_dict: push(made(Value(Dict{}))); return;
      case Op::dict: {
        Value dict = made(Value(Dict{}));
        const std::size_t mark = close_mark();
        set_items(dict, std::span(stack_).subspan(mark));
        stack_.resize(mark);
        push(std::move(dict));
        return;
      }
      case Op::setitem: {
        Value value = pop();
        Value key = pop();
        std::array<Value, 2> item{std::move(key), std::move(value)};
        set_items(top(), item);
        return;
      }
      case Op::setitems: {  // the items are taken where they lie on the stack: a batch of 1,000 is not copied
        const std::size_t mark = close_mark();
        if (mark <= floor()) fail("pickle stack underflow");
        set_items(stack_[mark - 1], std::span(stack_).subspan(mark));
        stack_.resize(mark);
        return;
      }
      case Op::empty_set: push(made(Value(Set{}))); return;
      case Op::additems: {
        List items = pop_mark();
        add_items(top(), std::move(items));
        return;
      }
      case Op::frozenset: {
        Value set = Value(Set{});
        adopt(set);
        add_items(set, pop_mark());
        ValueAccess::set(set).frozen = true;
        push(std::move(set));
        return;
      }
      case Op::global: {
        const std::string module(read_line());
        const std::string name(read_line());
        push(made(hooks_.find_class(module, name, op_at_)));
        return;
      }
      case Op::stack_global: {
        Value name = pop();
        Value module = pop();
        if (!module.is_string() || !name.is_string()) fail("STACK_GLOBAL needs two strings");
        push(made(hooks_.find_class(module.as_string(), name.as_string(), op_at_)));
        return;
      }
      case Op::reduce: {
        Value args = pop();
        Value callable = pop();
        if (!args.is_tuple()) fail("REDUCE needs an argument tuple; got " + std::string(Value::kind_name(args.kind())));
        push(made(hooks_.reduce(callable, std::move(args), op_at_)));
        return;
      }
      case Op::newobj: {
        Value args = pop();
        Value cls = pop();
        if (!args.is_tuple()) fail("NEWOBJ needs an argument tuple; got " + std::string(Value::kind_name(args.kind())));
        push(made(hooks_.new_object(cls, std::move(args), op_at_)));
        return;
      }
      case Op::newobj_ex: {
        Value kwargs = pop();
        Value args = pop();
        Value cls = pop();
        if (!args.is_tuple() || !kwargs.is_dict()) fail("NEWOBJ_EX needs an argument tuple and a keyword dict");
        if (!kwargs.as_dict().empty()) fail("NEWOBJ_EX with keyword arguments is not supported");
        push(made(hooks_.new_object(cls, std::move(args), op_at_)));
        return;
      }
      case Op::build: {
        Value state = pop();
        Value& object = top();
        if (is_mutable_container(object) && nesting_of(object)->sealed) {
          fail("BUILD on an object already placed in another container");
        }
        if (state.identity() != nullptr && state.identity() == object.identity())
          fail("BUILD gives an object itself as state");
        seal(state);
        const std::size_t depth = depth_of(state) + 1;
        if (depth > limits_.max_depth) over("nesting exceeds " + std::to_string(limits_.max_depth) + " levels");
        const std::uint64_t state_reach = reach_of(state);
        Value built = hooks_.build(object, std::move(state), op_at_);
        if (is_container(built) && depth > 1) record_depth(built, depth);
        if (is_container(built)) record_reach(built, reach_of(built), state_reach);
        object = std::move(built);
        return;
      }
      case Op::binpersid: {
        Value pid = pop();
        push(made(hooks_.persistent_load(std::move(pid), op_at_)));
        return;
      }
      case Op::persid: push(made(hooks_.persistent_load(Value(std::string(read_line())), op_at_))); return;
      case Op::binput: memo_put(read_le<std::uint8_t>()); return;
      case Op::long_binput: memo_put(read_le<std::uint32_t>()); return;
      case Op::memoize: memo_put(memo_size_ + sparse_memo_.size()); return;
      case Op::binget: memo_get(read_le<std::uint8_t>()); return;
      case Op::long_binget: memo_get(read_le<std::uint32_t>()); return;
      case Op::put: memo_put(static_cast<std::uint64_t>(parse_text_int(read_line()).as_int())); return;
      case Op::get: memo_get(static_cast<std::uint64_t>(parse_text_int(read_line()).as_int())); return;
      default: {
        fail("unsupported pickle opcode 0x" + hex_text(op, 2));
      }
    }
  }

  void push_bytes(std::uint64_t n) {
    const auto raw = read_span(n);
    push(Value(Bytes{{raw.begin(), raw.end()}}));
  }

  // How far ahead of a MARK a recognized call is looked for in a window.
  static constexpr std::uint64_t call_lookahead = 4096;

  std::span<const std::byte> window_;  // the pickle's bytes from base_ (all of them without a source)
  std::uint64_t base_ = 0;
  std::uint64_t size_ = 0;
  std::function<void(std::uint64_t, std::span<std::byte>)> source_;  // empty: the pickle is in memory
  std::size_t window_bytes_ = default_window;
  std::vector<std::byte> buffer_;  // the window's bytes, with a source
  std::uint64_t keep_from_ = 0;    // first offset whose bytes a refill must keep (see refill)
  Hooks& hooks_;
  ErrorLocation where_;
  PickleLimits limits_;
  static constexpr std::size_t python_batch_pairs = 1000;  // pickle.py's _BATCHSIZE
  std::size_t large_dict_items_ = 0;                       // see expect_large_dict
  Value sized_dict_;                                       // the dict that got that room, until STOP
  std::uint64_t pos_ = 0;
  std::uint64_t op_at_ = 0;
  std::vector<Value> stack_;
  std::vector<std::size_t> marks_;
  // Dense memo indices [0, memo_size_). Torch files memoize nearly every object and read back only a few, so only
  // the indices some GET names have a slot (memo_slot): 0 for the placeholder, else 1 + the index of its Value in
  // memo_values_. Without a finished scan, every index has one.
  std::uint64_t memo_size_ = 0;
  std::vector<std::uint32_t> memo_slots_;
  std::vector<Value> memo_values_;
  std::unordered_map<std::uint64_t, Value> sparse_memo_;
  std::vector<std::uint64_t> read_words_;  // bit i: some GET names index i (from scan_memo_reads)
  std::vector<std::uint32_t> read_rank_;   // per word of read_words_: the read indices below it
  bool reads_unknown_ = true;              // the scan could not finish: keep every memo entry
  std::uint64_t copied_text_ = 0;          // bytes of str values copied by the memo and DUP (charge_copy)
  const Value placeholder_;
  const Value empty_tuple_ = Value::tuple({});
};

}  // namespace tensorfile::detail
