// SPDX-License-Identifier: MIT
// The pickle opcodes of protocols 0 to 5 and the shape of each one's argument: the one table the
// machine, its memo scan, the tensor-call matcher and the writer all spell opcodes from.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace tensorfile::detail {

/// A pickle opcode (Python's pickletools names, lower case), tagged with its protocol.
enum class Op : std::uint8_t {
  // protocol 0 and 1
  mark = '(',
  stop = '.',
  pop = '0',
  pop_mark = '1',
  dup = '2',
  floating = 'F',  ///< FLOAT: text line
  integer = 'I',   ///< INT: text line ("00"/"01" are False/True)
  binint = 'J',
  binint1 = 'K',
  long_text = 'L',  ///< LONG: text line
  binint2 = 'M',
  none = 'N',
  persid = 'P',
  binpersid = 'Q',
  reduce = 'R',
  string = 'S',  ///< quoted text line (not run by the machine)
  binstring = 'T',
  short_binstring = 'U',
  unicode = 'V',  ///< raw-unicode-escaped line (not run by the machine)
  binunicode = 'X',
  append = 'a',
  build = 'b',
  global = 'c',
  dict = 'd',
  empty_dict = '}',
  appends = 'e',
  get = 'g',
  binget = 'h',
  inst = 'i',  ///< not run by the machine
  long_binget = 'j',
  list = 'l',
  empty_list = ']',
  obj = 'o',  ///< not run by the machine
  put = 'p',
  binput = 'q',
  long_binput = 'r',
  setitem = 's',
  tuple = 't',
  empty_tuple = ')',
  setitems = 'u',
  binfloat = 'G',
  // protocol 2
  proto = 0x80,
  newobj = 0x81,
  ext1 = 0x82,  ///< extension registry codes: not run by the machine
  ext2 = 0x83,
  ext4 = 0x84,
  tuple1 = 0x85,
  tuple2 = 0x86,
  tuple3 = 0x87,
  newtrue = 0x88,
  newfalse = 0x89,
  long1 = 0x8a,
  long4 = 0x8b,
  // protocol 3
  binbytes = 'B',
  short_binbytes = 'C',
  // protocol 4
  short_binunicode = 0x8c,
  binunicode8 = 0x8d,
  binbytes8 = 0x8e,
  empty_set = 0x8f,
  additems = 0x90,
  frozenset = 0x91,
  newobj_ex = 0x92,
  stack_global = 0x93,
  memoize = 0x94,
  frame = 0x95,
  // protocol 5
  bytearray8 = 0x96,
  next_buffer = 0x97,  ///< out-of-band buffers: not run by the machine
  readonly_buffer = 0x98,
};

/// TUPLE1, TUPLE2 or TUPLE3 for `size` 1 to 3 (they are consecutive).
[[nodiscard]] constexpr Op tuple_op(std::size_t size) noexcept {
  return static_cast<Op>(static_cast<std::uint8_t>(Op::tuple1) + size - 1);
}

/// How an opcode's argument is laid out in the bytes after it (widths in bytes, little-endian
/// except BINFLOAT's big-endian double).
enum class OpArg : std::uint8_t {
  none,
  fixed1,
  fixed2,
  fixed4,
  fixed8,  ///< a number of that width
  counted1,
  counted4,
  counted8,         ///< a length of that width, then that many bytes
  counted_signed4,  ///< a signed 4-byte length (negative is an error), then that many bytes
  line,             ///< text up to a newline
  two_lines,        ///< two newline-ended lines (module, name)
};

/// What an opcode does to the memo.
enum class OpMemo : std::uint8_t {
  none,
  write,  ///< PUT, BINPUT, LONG_BINPUT, MEMOIZE
  read,   ///< GET, BINGET, LONG_BINGET (the index is the argument)
};

/// What the memo scan needs to know of an opcode without running it.
struct OpInfo {
  bool runs = false;  ///< the machine runs it (others fail as unsupported)
  OpArg arg = OpArg::none;
  OpMemo memo = OpMemo::none;
};

namespace op_table {  // builds op_info
constexpr OpInfo plain(OpArg arg = OpArg::none) { return {true, arg, OpMemo::none}; }
constexpr void set(std::array<OpInfo, 256>& t, Op op, OpInfo info) { t[static_cast<std::uint8_t>(op)] = info; }
constexpr std::array<OpInfo, 256> make() {
  std::array<OpInfo, 256> t{};  // every other byte: not an opcode, not run
  for (Op op : {Op::mark,      Op::stop,      Op::pop,        Op::pop_mark,  Op::dup,       Op::none,
                Op::binpersid, Op::reduce,    Op::append,     Op::build,     Op::dict,      Op::empty_dict,
                Op::appends,   Op::list,      Op::empty_list, Op::setitem,   Op::tuple,     Op::empty_tuple,
                Op::setitems,  Op::newobj,    Op::tuple1,     Op::tuple2,    Op::tuple3,    Op::newtrue,
                Op::newfalse,  Op::empty_set, Op::additems,   Op::frozenset, Op::newobj_ex, Op::stack_global}) {
    set(t, op, plain());
  }
  set(t, Op::proto, plain(OpArg::fixed1));
  set(t, Op::binint1, plain(OpArg::fixed1));
  set(t, Op::binint2, plain(OpArg::fixed2));
  set(t, Op::binint, plain(OpArg::fixed4));
  set(t, Op::binfloat, plain(OpArg::fixed8));
  set(t, Op::frame, plain(OpArg::fixed8));
  for (Op op : {Op::long1, Op::short_binunicode, Op::short_binstring, Op::short_binbytes}) {
    set(t, op, plain(OpArg::counted1));
  }
  set(t, Op::binunicode, plain(OpArg::counted4));
  set(t, Op::binbytes, plain(OpArg::counted4));
  set(t, Op::long4, plain(OpArg::counted_signed4));
  set(t, Op::binstring, plain(OpArg::counted_signed4));
  for (Op op : {Op::binunicode8, Op::binbytes8, Op::bytearray8}) set(t, op, plain(OpArg::counted8));
  for (Op op : {Op::integer, Op::long_text, Op::floating, Op::persid}) set(t, op, plain(OpArg::line));
  set(t, Op::global, plain(OpArg::two_lines));
  set(t, Op::put, {true, OpArg::line, OpMemo::write});
  set(t, Op::binput, {true, OpArg::fixed1, OpMemo::write});
  set(t, Op::long_binput, {true, OpArg::fixed4, OpMemo::write});
  set(t, Op::memoize, {true, OpArg::none, OpMemo::write});
  set(t, Op::get, {true, OpArg::line, OpMemo::read});
  set(t, Op::binget, {true, OpArg::fixed1, OpMemo::read});
  set(t, Op::long_binget, {true, OpArg::fixed4, OpMemo::read});
  // Known, not run: the scan stops at them and the run reports them.
  for (Op op : {Op::string, Op::unicode}) set(t, op, {false, OpArg::line, OpMemo::none});
  set(t, Op::inst, {false, OpArg::two_lines, OpMemo::none});
  set(t, Op::obj, {});
  set(t, Op::ext1, {false, OpArg::fixed1, OpMemo::none});
  set(t, Op::ext2, {false, OpArg::fixed2, OpMemo::none});
  set(t, Op::ext4, {false, OpArg::fixed4, OpMemo::none});
  set(t, Op::next_buffer, {});
  set(t, Op::readonly_buffer, {});
  return t;
}
}  // namespace op_table

/// Facts about every byte as an opcode, indexed by the byte.
inline constexpr std::array<OpInfo, 256> op_info = op_table::make();

/// One byte naming an opcode's argument layout and memo effect together, so that a reader that
/// skips opcodes (the memo scan) dispatches once, on a key whose widths are constants.
[[nodiscard]] constexpr std::uint8_t op_shape(OpArg arg, OpMemo memo) noexcept {
  return static_cast<std::uint8_t>(static_cast<std::uint8_t>(arg) | static_cast<std::uint8_t>(memo) << 4);
}
/// op_shape of an opcode the machine does not run.
inline constexpr std::uint8_t op_shape_not_run = 0xFF;
/// op_shape of STOP, which ends a scan.
inline constexpr std::uint8_t op_shape_stop = 0xFE;

/// op_info as op_shape keys, indexed by the byte.
inline constexpr std::array<std::uint8_t, 256> op_shapes = [] {
  std::array<std::uint8_t, 256> shapes{};
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    shapes[i] = !op_info[i].runs                           ? op_shape_not_run
                : i == static_cast<std::uint8_t>(Op::stop) ? op_shape_stop
                                                           : op_shape(op_info[i].arg, op_info[i].memo);
  }
  return shapes;
}();

}  // namespace tensorfile::detail
