// SPDX-License-Identifier: MIT
// Walks one pickle's opcodes without building any object: the globals it references (GLOBAL, STACK_GLOBAL, INST,
// OBJ), which of them it calls, its persistent ids, and the constructs only a crafted file uses.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <algorithm>

#include "tensorfile/detail/text/hex.hpp"
#include "tensorfile/formats/torch/detail/global_verdicts.hpp"
#include "tensorfile/formats/torch/detail/opcodes.hpp"

namespace tensorfile::detail {

/// One global a pickle references.
struct PickleGlobal {
  std::string module{};
  std::string name{};
  std::string_view opcode{};  ///< "GLOBAL", "STACK_GLOBAL" or "INST"
  std::uint64_t offset = 0;   ///< of the opcode, from the start of the scanned bytes
  bool called = false;        ///< REDUCE, NEWOBJ, NEWOBJ_EX, OBJ or INST calls it
};

/// Something a pickler never writes, with where it is.
struct PickleAnomaly {
  std::uint64_t offset = 0;
  std::string what{};
};

/// What scan_pickle found in one pickle.
struct PickleScan {
  std::vector<PickleGlobal> globals{};
  std::vector<PickleAnomaly> anomalies{};
  std::size_t persistent_ids = 0;
  std::size_t extensions = 0;            ///< EXT1, EXT2, EXT4: globals named through copyreg's registry
  int protocol = -1;                     ///< PROTO's argument; -1 without one (protocol 0 or 1)
  std::uint64_t end = 0;                 ///< offset just past STOP (or where the walk stopped)
  std::optional<PickleAnomaly> error{};  ///< truncated or not a pickle: the walk stopped there
  bool truncated = false;                ///< the walk ran out of bytes (longer bytes might walk on)
};

/// The protocol that introduced opcode byte `op` (0 for protocols 0 and 1).
[[nodiscard]] constexpr int op_protocol(std::uint8_t op) noexcept {
  if (op >= 0x96 && op <= 0x98) return 5;
  if (op >= 0x8c && op <= 0x95) return 4;
  if (op == static_cast<std::uint8_t>(Op::binbytes) || op == static_cast<std::uint8_t>(Op::short_binbytes)) return 3;
  if (op >= 0x80 && op <= 0x8b) return 2;
  return 0;
}

/// Whether byte `op` is an opcode of protocols 0 to 5.
[[nodiscard]] constexpr bool is_opcode(std::uint8_t op) noexcept {
  const OpInfo& info = op_info[op];
  return info.runs || info.arg != OpArg::none || op == static_cast<std::uint8_t>(Op::obj) ||
         op == static_cast<std::uint8_t>(Op::next_buffer) || op == static_cast<std::uint8_t>(Op::readonly_buffer);
}

/// For each byte: the protocol that introduced it as an opcode, or -1 when it is not one; one load per opcode
/// in the walk.
inline constexpr std::array<std::int8_t, 256> opcode_protocols = [] {
  std::array<std::int8_t, 256> table{};
  for (int op = 0; op < 256; ++op) {
    const auto byte = static_cast<std::uint8_t>(op);
    table[byte] = static_cast<std::int8_t>(is_opcode(byte) ? op_protocol(byte) : -1);
  }
  return table;
}();

/// The walker behind scan_pickle: a stack of what each value is, as far as a global reference needs to know.
class PickleScanner {
 public:
  explicit PickleScanner(std::span<const std::byte> bytes) noexcept : bytes_(bytes) {}

  /// Walks the pickle starting at `start` up to and including its STOP.
  [[nodiscard]] PickleScan run(std::uint64_t start) {
    pos_ = start;
    // A checkpoint's pickle nests a few levels and memoises a few dozen values: one allocation each, not a series
    // of doublings (more is still allocated as the pickle needs it, one slot per opcode at most).
    stack_.reserve(64);
    memo_dense_.reserve(64);
    while (!out_.error) {
      if (pos_ >= bytes_.size()) {
        fail(pos_, "the pickle ends before its STOP opcode");
        out_.truncated = true;
        break;
      }
      at_ = pos_;
      const auto op = std::to_integer<std::uint8_t>(bytes_[pos_++]);
      const int introduced = opcode_protocols[op];
      if (introduced < 0) {
        fail(at_, "byte 0x" + hex_text(op, 2) + " is not a pickle opcode");
        break;
      }
      if (!read_argument(op_info[op].arg)) {
        half_global(static_cast<Op>(op));
        break;
      }
      if (introduced > std::max(out_.protocol, 1) && op != static_cast<std::uint8_t>(Op::proto)) {
        note("opcode 0x" + hex_text(op, 2) + " of protocol " + std::to_string(introduced) + " in a protocol " +
             std::to_string(std::max(out_.protocol, 0)) + " pickle");
      }
      if (static_cast<Op>(op) == Op::stop) {
        if (stack_.size() != 1 || stack_[0].kind == Kind::mark) {
          note("STOP leaves " + std::to_string(stack_.size()) + " items on the stack; expected 1");
        }
        break;
      }
      step(static_cast<Op>(op));
    }
    out_.end = pos_;
    return std::move(out_);
  }

 private:
  enum class Kind : std::uint8_t { mark, text, global, made, other };
  struct Item {
    Kind kind = Kind::other;
    std::string_view text{};  // Kind::text: the string's bytes, borrowed from the input
    std::size_t global = 0;   // Kind::global, Kind::made (what calling the global returned): index in out_.globals
  };
  static constexpr std::size_t max_anomalies = 64;  // a hostile file cannot grow the report without bound

  void fail(std::uint64_t offset, std::string what) { out_.error = PickleAnomaly{offset, std::move(what)}; }
  void note(std::string what) {
    if (out_.anomalies.size() < max_anomalies) out_.anomalies.push_back({at_, std::move(what)});
  }

  [[nodiscard]] std::string_view text_at(std::uint64_t from, std::uint64_t size) const noexcept {
    return {reinterpret_cast<const char*>(bytes_.data()) + from, static_cast<std::size_t>(size)};
  }
  [[nodiscard]] std::uint64_t number(std::size_t width) const noexcept {
    std::uint64_t value = 0;
    for (std::size_t i = 0; i < width; ++i) value |= std::to_integer<std::uint64_t>(bytes_[arg_ + i]) << (8 * i);
    return value;
  }

  // Reads the argument after the opcode at at_: arg_/arg_size_ hold it (for lines, without the newline; for two
  // lines, line2_ holds the second). Returns false (with the error set) when it runs past the end.
  bool read_argument(OpArg arg) {
    const auto line = [&](std::uint64_t& from, std::uint64_t& size) {
      from = pos_;
      while (pos_ < bytes_.size() && bytes_[pos_] != std::byte{'\n'}) ++pos_;
      if (pos_ >= bytes_.size()) {
        fail(at_, "the opcode's text line has no newline");
        out_.truncated = true;
        return false;
      }
      size = pos_++ - from;
      return true;
    };
    arg_ = pos_;
    arg_size_ = 0;
    switch (arg) {
      case OpArg::none: return true;
      case OpArg::fixed1: arg_size_ = 1; return take(1);
      case OpArg::fixed2: arg_size_ = 2; return take(2);
      case OpArg::fixed4: arg_size_ = 4; return take(4);
      case OpArg::fixed8: arg_size_ = 8; return take(8);
      case OpArg::counted1:
      case OpArg::counted4:
      case OpArg::counted8:
      case OpArg::counted_signed4: {
        const std::size_t width = arg == OpArg::counted1 ? 1 : arg == OpArg::counted8 ? 8 : 4;
        if (!take(width)) return false;
        std::uint64_t size = number(width);
        if (arg == OpArg::counted_signed4 && size >= 0x80000000u) {
          fail(at_, "negative length");
          return false;
        }
        arg_ = pos_;
        arg_size_ = size;
        return take(size);
      }
      case OpArg::line: return line(arg_, arg_size_);
      case OpArg::two_lines: return line(arg_, arg_size_) && line(line2_, line2_size_);
    }
    return true;
  }
  // A GLOBAL or INST whose name line the bytes cut: Python's readline hands back the rest, so the module named by
  // the complete first line is imported (and may run code) before the lookup fails. Kept, with what the name
  // would read as (its last byte dropped, as the unpickler drops the newline).
  void half_global(Op op) {
    if ((op != Op::global && op != Op::inst) || line2_ == 0 || line2_ <= arg_) return;
    const std::uint64_t rest = bytes_.size() - line2_;
    add_global(text_at(arg_, arg_size_), text_at(line2_, rest == 0 ? 0 : rest - 1),
               op == Op::global ? "GLOBAL" : "INST");
  }
  bool take(std::uint64_t n) {
    if (n > bytes_.size() - pos_) return past_end(n);
    pos_ += n;
    return true;
  }
  // The message is built apart from take_rest, which runs for every argument: inlined, it was a call per opcode.
  bool past_end(std::uint64_t n) {
    fail(at_, "the opcode's argument runs past the end (" + std::to_string(n) + " bytes, " +
                  std::to_string(bytes_.size() - pos_) + " left)");
    out_.truncated = true;
    return false;
  }

  void push(Item item) { stack_.push_back(item); }
  void push_other() { stack_.push_back({}); }
  std::optional<Item> pop() {
    if (stack_.empty()) {
      fail(at_, "stack underflow");
      return std::nullopt;
    }
    Item top = stack_.back();
    stack_.pop_back();
    return top;
  }
  // Pops down to the topmost MARK, the MARK included; `first` (when given) receives the item just above it, if
  // there was one. Returns false (error set) when there is no MARK.
  bool pop_to_mark(std::optional<Item>* first = nullptr) {
    for (std::size_t i = stack_.size(); i-- > 0;) {
      if (stack_[i].kind == Kind::mark) {
        if (first != nullptr && i + 1 < stack_.size()) *first = stack_[i + 1];
        stack_.resize(i);
        return true;
      }
    }
    fail(at_, "no MARK on the stack");
    return false;
  }
  // Marks the callee called and pushes what the call returns.
  void call(const Item& callee) {
    if (callee.kind != Kind::global) {
      push_other();
      return;
    }
    out_.globals[callee.global].called = true;
    push({Kind::made, {}, callee.global});
  }
  [[nodiscard]] std::string global_name(std::size_t index) const {
    return out_.globals[index].module + "." + out_.globals[index].name;
  }
  // weights_only's BUILD updates an instance of exactly torch.Tensor, Parameter or OrderedDict; plain torch.load's
  // also sets the attributes of a class or function it is given, for the whole process. A BUILD on another value
  // (a dict, a persistent id) fails in both, running nothing.
  void build() {
    if (!pop() || stack_.empty()) {
      if (!out_.error) fail(at_, "stack underflow");
      return;
    }
    const Item& target = stack_.back();
    if (target.kind == Kind::global) {
      note("BUILD on the global " + global_name(target.global) +
           " itself: sets its attributes for the whole process; torch.load(weights_only=True) refuses it");
    } else if (target.kind == Kind::made) {
      // What a global off the allow-list returns is that global's matter (its verdict, or the caller's --allow).
      const std::string maker = global_name(target.global);
      const bool on_list = listed(weights_only_allowed, maker) || listed(weights_only_rebuild_functions, maker) ||
                           listed(weights_only_storage_classes, maker);
      if (on_list && !listed(weights_only_build_makers, maker)) {
        note("BUILD on what " + maker +
             " returns; torch.load(weights_only=True) updates only tensors, parameters and OrderedDicts");
      }
    }
  }
  std::size_t add_global(std::string_view module, std::string_view name, std::string_view opcode) {
    out_.globals.push_back({kept_name(module), kept_name(name), opcode, at_, false});
    return out_.globals.size() - 1;
  }
  // A name past 256 bytes is kept cut and marked (so it never equals a name a verdict lists): a long str memoized
  // once and named by many STACK_GLOBALs, 6 bytes each, was copied whole into each reference (10 KB names, 80 KB
  // of pickle: 200 MB).
  std::string kept_name(std::string_view text) {
    constexpr std::size_t longest = 256;
    if (text.size() <= longest) return std::string(text);
    note("a global's name of " + std::to_string(text.size()) + " bytes, cut to its first " + std::to_string(longest));
    return std::string(text.substr(0, longest)) + "...(" + std::to_string(text.size()) + " bytes)";
  }
  void memo_put(std::uint64_t index) {
    if (stack_.empty()) {
      fail(at_, "memo write with an empty stack");
      return;
    }
    if (stack_.back().kind == Kind::mark) note("memo write of a MARK");
    if (index == memo_dense_.size() && memo_sparse_.empty()) {  // what every pickler writes
      memo_dense_.push_back(stack_.back());
      return;
    }
    // A pickler numbers its memo 0, 1, 2...: those go to the vector, one slot per write. Any other index goes to
    // the map, so an index a crafted file names never sizes an allocation. An index lives in one of the two.
    const auto sparse = memo_sparse_.empty() ? memo_sparse_.end() : memo_sparse_.find(index);
    if (index == memo_dense_.size() && sparse == memo_sparse_.end()) {
      memo_dense_.push_back(stack_.back());
      return;
    }
    Item* const slot = index < memo_dense_.size()     ? &memo_dense_[static_cast<std::size_t>(index)]
                       : sparse != memo_sparse_.end() ? &sparse->second
                                                      : nullptr;
    if (slot == nullptr) {
      memo_sparse_.emplace(index, stack_.back());
      return;
    }
    note("memo index " + std::to_string(index) + " written twice");
    *slot = stack_.back();
  }
  [[nodiscard]] const Item* memo_get(std::uint64_t index) const {
    if (index < memo_dense_.size()) return &memo_dense_[static_cast<std::size_t>(index)];
    if (memo_sparse_.empty()) return nullptr;
    const auto found = memo_sparse_.find(index);
    return found == memo_sparse_.end() ? nullptr : &found->second;
  }
  // A PUT or GET line's index as CPython's unpickler reads it (PyLong_FromString, base 10, on the line as a C
  // string): up to a NUL byte, spaces around it, a sign, leading zeros and single underscores between digits are
  // all accepted. A walk stricter than CPython would stop where CPython goes on, and take what follows for data.
  std::optional<std::uint64_t> line_number() const {
    std::string_view text = text_at(arg_, arg_size_);
    text = text.substr(0, text.find('\0'));
    const auto space = [](char c) { return c == ' ' || (c >= '\t' && c <= '\r'); };
    while (!text.empty() && space(text.front())) text.remove_prefix(1);
    while (!text.empty() && space(text.back())) text.remove_suffix(1);
    bool negative = false;
    if (!text.empty() && (text.front() == '+' || text.front() == '-')) {
      negative = text.front() == '-';
      text.remove_prefix(1);
    }
    const auto digit = [](char c) { return c >= '0' && c <= '9'; };
    std::uint64_t value = 0;
    for (std::size_t i = 0; i < text.size(); ++i) {
      if (text[i] == '_' && i > 0 && digit(text[i - 1]) && i + 1 < text.size() && digit(text[i + 1])) continue;
      if (!digit(text[i]) || value > (UINT64_MAX - 9) / 10) return std::nullopt;
      value = value * 10 + static_cast<std::uint64_t>(text[i] - '0');
    }
    if (text.empty() || (negative && value != 0)) return std::nullopt;  // a negative index is CPython's error too
    return value;
  }
  // A quoted STRING line's contents, quotes removed.
  [[nodiscard]] std::string_view unquoted() const noexcept {
    std::string_view text = text_at(arg_, arg_size_);
    if (text.size() >= 2 && (text.front() == '\'' || text.front() == '"') && text.back() == text.front()) {
      return text.substr(1, text.size() - 2);
    }
    return text;
  }

  void step(Op op) {
    switch (op) {
      case Op::mark: push({Kind::mark}); break;
      case Op::pop: (void)pop(); break;
      case Op::pop_mark: (void)pop_to_mark(); break;
      case Op::dup:
        if (stack_.empty())
          fail(at_, "stack underflow");
        else
          push(stack_.back());
        break;
      case Op::string: push({Kind::text, unquoted()}); break;
      case Op::binstring:
      case Op::short_binstring:
      case Op::unicode:
      case Op::binunicode:
      case Op::short_binunicode:
      case Op::binunicode8: push({Kind::text, text_at(arg_, arg_size_)}); break;
      case Op::persid:
        ++out_.persistent_ids;
        push_other();
        break;
      case Op::binpersid:
        ++out_.persistent_ids;
        if (pop()) push_other();
        break;
      case Op::reduce:
      case Op::newobj: {
        const auto args = pop();
        const auto callee = args ? pop() : std::nullopt;
        if (callee) call(*callee);
        break;
      }
      case Op::newobj_ex: {
        const auto kwargs = pop();
        const auto args = kwargs ? pop() : std::nullopt;
        const auto callee = args ? pop() : std::nullopt;
        if (callee) call(*callee);
        break;
      }
      case Op::build: build(); break;
      case Op::append: (void)pop(); break;
      case Op::setitem:
        if (pop()) (void)pop();
        break;
      case Op::appends:
      case Op::setitems:
      case Op::additems: (void)pop_to_mark(); break;
      case Op::tuple:
      case Op::list:
      case Op::dict:
      case Op::frozenset:
        if (pop_to_mark()) push_other();
        break;
      case Op::tuple1:
      case Op::tuple2:
      case Op::tuple3: {
        const int count = static_cast<int>(op) - static_cast<int>(Op::tuple1) + 1;
        for (int i = 0; i < count && !out_.error; ++i) (void)pop();
        if (!out_.error) push_other();
        break;
      }
      case Op::global:
        push({Kind::global, {}, add_global(text_at(arg_, arg_size_), text_at(line2_, line2_size_), "GLOBAL")});
        break;
      case Op::stack_global: {
        const auto name = pop();
        const auto module = name ? pop() : std::nullopt;
        if (!module) break;
        if (module->kind != Kind::text || name->kind != Kind::text) {
          note("STACK_GLOBAL on operands that are not strings");
          push({Kind::global, {}, add_global("?", "?", "STACK_GLOBAL")});
        } else {
          push({Kind::global, {}, add_global(module->text, name->text, "STACK_GLOBAL")});
        }
        break;
      }
      case Op::inst: {
        const std::size_t global = add_global(text_at(arg_, arg_size_), text_at(line2_, line2_size_), "INST");
        out_.globals[global].called = true;
        if (pop_to_mark()) push({Kind::made, {}, global});
        break;
      }
      case Op::obj: {
        std::optional<Item> callee;
        if (!pop_to_mark(&callee)) break;
        if (!callee) {
          fail(at_, "OBJ without a class");
          break;
        }
        call(*callee);
        break;
      }
      case Op::ext1:
      case Op::ext2:
      case Op::ext4:
        note("extension registry code (copyreg): names a global this scan cannot see");
        ++out_.extensions;
        push_other();
        break;
      case Op::put:
        if (const auto index = line_number())
          memo_put(*index);
        else
          fail(at_, "PUT index is not a number");
        break;
      case Op::binput: memo_put(number(1)); break;
      case Op::long_binput: memo_put(number(4)); break;
      case Op::memoize: memo_put(memo_dense_.size() + memo_sparse_.size()); break;
      case Op::get:
      case Op::binget:
      case Op::long_binget: {
        const std::optional<std::uint64_t> index =
            op == Op::get ? line_number() : std::optional<std::uint64_t>(number(op == Op::binget ? 1 : 4));
        const Item* const found = index ? memo_get(*index) : nullptr;
        if (found == nullptr) {
          fail(at_, "memo read of an index never written");
        } else {
          push(*found);
        }
        break;
      }
      case Op::proto:
        if (at_ != first_) note("PROTO after the first opcode");
        if (number(1) > 5) note("protocol " + std::to_string(number(1)) + " is above 5");
        out_.protocol = static_cast<int>(number(1));
        break;
      case Op::frame:
      case Op::readonly_buffer:
      case Op::stop: break;
      default: push_other(); break;  // numbers, None, booleans, bytes, empty containers, NEXT_BUFFER
    }
  }

  std::span<const std::byte> bytes_;
  std::uint64_t pos_ = 0, at_ = 0, first_ = 0;
  std::uint64_t arg_ = 0, arg_size_ = 0, line2_ = 0, line2_size_ = 0;
  std::vector<Item> stack_{};
  std::vector<Item> memo_dense_{};                         // indices 0 to size - 1
  std::unordered_map<std::uint64_t, Item> memo_sparse_{};  // any other index written
  PickleScan out_{};

 public:
  /// Sets where the pickle starts (PROTO is expected there).
  PickleScanner& starting_at(std::uint64_t start) noexcept {
    first_ = start;
    return *this;
  }
};

/// Walks the pickle that starts at `start` in `bytes` up to its STOP; never builds an object, never allocates more
/// than the bytes hold. Truncation and non-opcode bytes end the walk with `error` set.
[[nodiscard]] inline PickleScan scan_pickle(std::span<const std::byte> bytes, std::uint64_t start = 0) {
  return PickleScanner(bytes).starting_at(start).run(start);
}

}  // namespace tensorfile::detail
