// SPDX-License-Identifier: MIT
// The lazy layouts tensordict's memmap() writes for views (_SubTensorDict and the _CustomOpTensorDict family),
// applied to their loaded `_source/`: the index or op parsed from meta.json, then applied to every entry.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tensorfile/core/error.hpp"
#include "tensorfile/core/tensor.hpp"
#include "tensorfile/core/value.hpp"
#include "tensorfile/detail/bytes/checked_math.hpp"
#include "tensorfile/formats/tensordict/tensordict.hpp"

namespace tensorfile::detail::td {

/// One item of a _SubTensorDict index (tensordict `_td.py` `_str_to_index`), for one batch dimension.
struct BatchIndex {
  enum class Kind : std::uint8_t { integer, slice, new_axis, ellipsis, positions };
  Kind kind = Kind::slice;
  std::int64_t value = 0;                                                             // integer
  std::int64_t start = 0, stop = std::numeric_limits<std::int64_t>::max(), step = 1;  // slice (None: 0, max)
  std::vector<std::int64_t> positions;  // list / tensor / range: an advanced index, which torch copies
  bool mask = false;                    // positions hold a boolean mask's 0/1 values
};

/// A view's index or op and its text for `inspect` ("permuted (1, 0) of _source").
struct LazyOp {
  enum class Kind : std::uint8_t { index, permute, transpose, unsqueeze, squeeze, view };
  Kind kind = Kind::index;
  std::vector<BatchIndex> index;   // expanded: one item per source batch dim, plus new axes
  std::vector<std::int64_t> ints;  // permute dims; transpose dim0, dim1; (un)squeeze dim; view size
  std::string text;
};

inline std::string ints_text(const std::vector<std::int64_t>& ints) {
  std::string out = "(";
  for (std::size_t i = 0; i < ints.size(); ++i) out += (i ? ", " : "") + std::to_string(ints[i]);
  return out + (ints.size() == 1 ? ",)" : ")");
}

// ---- parsing ----------------------------------------------------------------------------------

inline std::int64_t index_int(const Value* v, const ErrorLocation& where, const std::string& what) {
  if (v == nullptr || !v->is_int()) throw FormatError("index " + what + " is not an int; expected an int", where);
  return v->as_int();
}

inline std::vector<std::int64_t> index_positions(const Value& list, const ErrorLocation& where, bool& mask) {
  if (!list.is_list()) throw UnsupportedError("tensor index of rank 0 is not supported; expected a 1-d list", where);
  std::vector<std::int64_t> out;
  out.reserve(list.as_list().size());
  mask = !list.as_list().empty() && list.as_list()[0].is_bool();
  for (const Value& v : list.as_list()) {
    if (mask && v.is_bool()) {
      out.push_back(v.as_bool() ? 1 : 0);
    } else if (!mask && v.is_int()) {
      out.push_back(v.as_int());
    } else {
      throw UnsupportedError("advanced index holds a " + std::string(Value::kind_name(v.kind())) +
                                 "; expected a 1-d list of ints or of bools",
                             where);
    }
  }
  return out;
}

inline BatchIndex parse_index_item(const Value& v, const ErrorLocation& where) {
  BatchIndex item;
  if (v.is_int()) {
    item.kind = BatchIndex::Kind::integer;
    item.value = v.as_int();
    return item;
  }
  if (v.is_none()) {
    item.kind = BatchIndex::Kind::new_axis;
    return item;
  }
  const std::string kind_text(Value::kind_name(v.kind()));
  if (!v.is_list() || v.as_list().empty() || !v.as_list()[0].is_string()) {
    throw UnsupportedError(
        "index item is a " + kind_text + "; expected an int, null or a tagged slice, list, range, tensor or ellipsis",
        where);
  }
  const List& tagged = v.as_list();
  const std::string& tag = tagged[0].as_string();
  if (tag == "ellipsis") {
    item.kind = BatchIndex::Kind::ellipsis;
    return item;
  }
  if (tag == "slice" || tag == "range") {
    const Value* body = tagged.size() == 2 && tagged[1].is_dict() ? &tagged[1] : nullptr;
    if (body == nullptr) throw FormatError(tag + " index is not [\"" + tag + "\", {start, stop, step}]", where);
    const auto field = [&](const char* name, std::int64_t fallback) {
      const Value* f = body->as_dict().find(std::string_view(name));
      return f == nullptr || f->is_none() ? fallback : index_int(f, where, tag + " " + name);
    };
    item.start = field("start", 0);
    item.stop = field("stop", std::numeric_limits<std::int64_t>::max());
    item.step = field("step", 1);
    if (item.step <= 0) {
      throw FormatError(tag + " step is " + std::to_string(item.step) + "; expected a positive step", where);
    }
    if (tag == "slice") return item;
    // range(start, stop, step) indexes like the list of its values; bounded, as a list in meta.json would be.
    item.kind = BatchIndex::Kind::positions;
    if (item.start < 0 || item.stop < item.start || (item.stop - item.start) / item.step > (std::int64_t{1} << 24)) {
      throw LimitError("range index is negative or longer than 2^24 values", where);
    }
    for (std::int64_t i = item.start; i < item.stop; i += item.step) item.positions.push_back(i);
    return item;
  }
  if (tag == "list" || tag == "tensor") {
    if (tagged.size() < 2) throw FormatError(tag + " index has no values", where);
    item.kind = BatchIndex::Kind::positions;
    item.positions = index_positions(tagged[1], where, item.mask);
    return item;
  }
  if (tag == "tuple") throw UnsupportedError("tuple nested inside an index is not supported", where);
  throw UnsupportedError("index tag \"" + tag + "\" is not supported; expected slice, range, list, tensor or ellipsis",
                         where);
}

/// The index of a _SubTensorDict's meta.json, one item per batch dim of a source of rank `rank`: the ellipsis
/// expanded and the trailing dims filled with full slices (what `convert_ellipsis_to_idx` and torch do).
inline std::vector<BatchIndex> parse_batch_index(const Value& v, std::size_t rank, const ErrorLocation& where) {
  std::vector<BatchIndex> items;
  const bool sequence = v.is_list() && !v.as_list().empty() && v.as_list()[0].is_string() &&
                        (v.as_list()[0].as_string() == "tuple" || v.as_list()[0].as_string() == "list");
  if (sequence) {  // _SubTensorDict.__init__ turns a top-level list into a tuple of its items
    if (v.as_list().size() != 2 || !v.as_list()[1].is_list()) throw FormatError("index tuple has no item list", where);
    for (const Value& e : v.as_list()[1].as_list()) items.push_back(parse_index_item(e, where));
  } else if (v.is_list() && (v.as_list().empty() || !v.as_list()[0].is_string())) {  // legacy untagged tuple
    for (const Value& e : v.as_list()) items.push_back(parse_index_item(e, where));
  } else {
    items.push_back(parse_index_item(v, where));
  }
  std::size_t consumed = 0, ellipses = 0, advanced = 0;
  for (const BatchIndex& item : items) {
    consumed += item.kind != BatchIndex::Kind::new_axis && item.kind != BatchIndex::Kind::ellipsis ? 1 : 0;
    ellipses += item.kind == BatchIndex::Kind::ellipsis ? 1 : 0;
    advanced += item.kind == BatchIndex::Kind::positions ? 1 : 0;
  }
  if (ellipses > 1) throw FormatError("index holds " + std::to_string(ellipses) + " ellipses; expected one", where);
  if (consumed > rank) {
    throw FormatError("index has " + std::to_string(consumed) + " items for a source of batch rank " +
                          std::to_string(rank) + "; expected at most " + std::to_string(rank),
                      where);
  }
  if (advanced > 1) throw UnsupportedError("index with more than one list or tensor item is not supported", where);
  std::vector<BatchIndex> out;
  for (BatchIndex& item : items) {
    if (item.kind != BatchIndex::Kind::ellipsis) {
      out.push_back(std::move(item));
      continue;
    }
    for (std::size_t i = consumed; i < rank; ++i) out.push_back({});
    consumed = rank;
  }
  for (std::size_t i = consumed; i < rank; ++i) out.push_back({});
  return out;
}

inline std::string index_text(const std::vector<BatchIndex>& items) {
  std::string out = "[";
  for (std::size_t i = 0; i < items.size(); ++i) {
    const BatchIndex& item = items[i];
    if (i) out += ", ";
    switch (item.kind) {
      case BatchIndex::Kind::integer: out += std::to_string(item.value); break;
      case BatchIndex::Kind::new_axis: out += "None"; break;
      case BatchIndex::Kind::ellipsis: out += "..."; break;
      case BatchIndex::Kind::positions: out += (item.mask ? "mask" : "list") + ints_text(item.positions); break;
      case BatchIndex::Kind::slice:
        out += (item.start != 0 ? std::to_string(item.start) : "") + ":" +
               (item.stop != std::numeric_limits<std::int64_t>::max() ? std::to_string(item.stop) : "") +
               (item.step != 1 ? ":" + std::to_string(item.step) : "");
        break;
    }
  }
  return out + "]";
}

/// The op of a _CustomOpTensorDict meta.json (tensordict `_lazy.py` `_CustomOpTensorDict._memmap_`), checked
/// against the source's batch size; an unknown class or op is an UnsupportedError.
inline LazyOp parse_custom_op(std::string_view cls, const Dict& fields, const Shape& source,
                              const ErrorLocation& where) {
  const Value* op = fields.find(std::string_view("custom_op"));
  const Value* kwargs = fields.find(std::string_view("custom_op_kwargs"));
  const std::string op_name = op != nullptr && op->is_string() ? op->as_string() : "?";
  struct Known {
    std::string_view cls, op, kwarg;
    LazyOp::Kind kind;
  };
  static constexpr Known known[] = {{"_PermutedTensorDict", "permute", "dims", LazyOp::Kind::permute},
                                    {"_TransposedTensorDict", "transpose", "dim0", LazyOp::Kind::transpose},
                                    {"_UnsqueezedTensorDict", "unsqueeze", "dim", LazyOp::Kind::unsqueeze},
                                    {"_SqueezedTensorDict", "squeeze", "dim", LazyOp::Kind::squeeze},
                                    {"_ViewedTensorDict", "view", "size", LazyOp::Kind::view}};
  const Known* match = nullptr;
  for (const Known& k : known) {
    if (k.cls == cls && k.op == op_name) match = &k;
  }
  if (match == nullptr) {
    throw UnsupportedError("lazy tensordict " + std::string(cls) + " with custom_op " + op_name +
                               " is not supported; expected _PermutedTensorDict permute, _TransposedTensorDict "
                               "transpose, _UnsqueezedTensorDict unsqueeze, _SqueezedTensorDict squeeze or "
                               "_ViewedTensorDict view",
                           where);
  }
  if (kwargs == nullptr || !kwargs->is_dict()) throw FormatError("custom_op_kwargs is not an object", where);
  const auto rank = static_cast<std::int64_t>(source.size());
  const auto dim_arg = [&](const char* name, std::int64_t extent) {  // negative dims count from the end
    std::int64_t d =
        index_int(kwargs->as_dict().find(std::string_view(name)), where, std::string(op_name) + " " + name);
    if (d < 0) d += extent;
    if (d < 0 || d >= extent) {
      throw FormatError(op_name + " " + name + " is out of range for batch size " + detail::shape_string(source),
                        where);
    }
    return d;
  };
  LazyOp out;
  out.kind = match->kind;
  switch (match->kind) {
    case LazyOp::Kind::permute:
    case LazyOp::Kind::view: {
      const Value* list = kwargs->as_dict().find(match->kwarg);
      if (list == nullptr || !list->is_list())
        throw FormatError(op_name + " has no list " + std::string(match->kwarg), where);
      for (const Value& v : list->as_list()) out.ints.push_back(index_int(&v, where, op_name + " item"));
      if (match->kind == LazyOp::Kind::view) {
        std::int64_t want = 1, got = 1;
        for (const auto s : source) want *= s;  // the source's batch was checked when it loaded
        for (const auto s : out.ints) {
          auto product = s < 0 ? std::nullopt : detail::checked_mul(got, s);
          if (!product) throw FormatError("view size " + ints_text(out.ints) + " is invalid", where);
          got = *product;
        }
        if (got != want) {
          throw FormatError("view size " + ints_text(out.ints) + " does not match the source batch size " +
                                detail::shape_string(source),
                            where);
        }
        out.text = "viewed as " + ints_text(out.ints);
        break;
      }
      std::vector<bool> seen(source.size(), false);
      for (auto& d : out.ints) {
        if (d < 0) d += rank;
        if (d < 0 || d >= rank || seen[static_cast<std::size_t>(d)] || out.ints.size() != source.size()) {
          throw FormatError("permute dims " + ints_text(out.ints) + " are not a permutation of the " +
                                std::to_string(rank) + " batch dims",
                            where);
        }
        seen[static_cast<std::size_t>(d)] = true;
      }
      out.text = "permuted " + ints_text(out.ints);
      break;
    }
    case LazyOp::Kind::transpose:
      out.ints = {dim_arg("dim0", rank), dim_arg("dim1", rank)};
      out.text = "transposed " + ints_text(out.ints);
      break;
    case LazyOp::Kind::unsqueeze:
      out.ints = {dim_arg("dim", rank + 1)};
      out.text = "unsqueezed at " + std::to_string(out.ints[0]);
      break;
    case LazyOp::Kind::squeeze:
      out.ints = {dim_arg("dim", rank)};
      out.text = "squeezed at " + std::to_string(out.ints[0]);
      break;
    case LazyOp::Kind::index: break;
  }
  return out;
}

// ---- applying -----------------------------------------------------------------------------------

/// The elements of `t` at `positions` along `dim`, as a new contiguous tensor (torch's advanced indexing copies).
inline Tensor gather_along(const Tensor& t, std::size_t dim, const std::vector<std::int64_t>& positions) {
  Shape sizes = t.sizes();
  sizes[dim] = static_cast<std::int64_t>(positions.size());
  if (t.device().is_meta()) return Tensor::zeros(std::move(sizes), t.dtype(), t.device());
  Shape stacked = sizes;  // the gathered dim first: each position's slice is one contiguous block
  stacked.erase(stacked.begin() + static_cast<std::ptrdiff_t>(dim));
  stacked.insert(stacked.begin(), sizes[dim]);
  Tensor gathered = Tensor::zeros(stacked, t.dtype());
  std::byte* at = gathered.storage().mutable_data();
  for (const std::int64_t p : positions) {
    const Tensor piece = t.select(static_cast<std::int64_t>(dim), p);
    piece.copy_into(at);
    at += piece.nbytes();
  }
  std::vector<std::int64_t> order;  // move the gathered dim back to its place
  for (std::size_t d = 1; d <= dim; ++d) order.push_back(static_cast<std::int64_t>(d));
  order.push_back(0);
  for (std::size_t d = dim + 1; d < sizes.size(); ++d) order.push_back(static_cast<std::int64_t>(d));
  return gathered.permute(order).contiguous();
}

/// The positions an advanced index selects from a dim of `extent`, checked; a mask becomes its true positions.
inline std::vector<std::int64_t> checked_positions(const BatchIndex& item, std::int64_t extent,
                                                   const ErrorLocation& where) {
  std::vector<std::int64_t> out;
  if (item.mask) {
    if (static_cast<std::int64_t>(item.positions.size()) != extent) {
      throw FormatError("boolean index of length " + std::to_string(item.positions.size()) +
                            " does not match a dim of size " + std::to_string(extent),
                        where);
    }
    for (std::size_t i = 0; i < item.positions.size(); ++i) {
      if (item.positions[i] != 0) out.push_back(static_cast<std::int64_t>(i));
    }
    return out;
  }
  for (std::int64_t p : item.positions) {
    if (p < -extent || p >= extent) {
      throw FormatError(
          "index " + std::to_string(p) + " is out of range for a source dim of size " + std::to_string(extent), where);
    }
    out.push_back(p < 0 ? p + extent : p);
  }
  return out;
}

/// `t[index]` for the leading (batch) dims of `t`: views for ints, slices and None, a copy for a list.
inline Tensor index_tensor(const Tensor& t, const std::vector<BatchIndex>& index, const ErrorLocation& where) {
  Tensor out = t;
  std::size_t d = 0;
  for (const BatchIndex& item : index) {
    const auto dim = static_cast<std::int64_t>(d);
    switch (item.kind) {
      case BatchIndex::Kind::integer: {
        const std::int64_t extent = out.sizes()[d];
        if (item.value < -extent || item.value >= extent) {
          throw FormatError("index " + std::to_string(item.value) + " is out of range for a source dim of size " +
                                std::to_string(extent),
                            where);
        }
        out = out.select(dim, item.value);
        break;
      }
      case BatchIndex::Kind::slice: out = out.slice(dim, item.start, item.stop, item.step), ++d; break;
      case BatchIndex::Kind::new_axis: out = out.unsqueeze(dim), ++d; break;
      case BatchIndex::Kind::positions:
        out = gather_along(out, d, checked_positions(item, out.sizes()[d], where)), ++d;
        break;
      case BatchIndex::Kind::ellipsis: break;  // expanded by parse_batch_index
    }
  }
  return out;
}

/// `op` applied to `t`, whose first `rank` dims are the source's batch dims.
inline Tensor op_tensor(const Tensor& t, const LazyOp& op, std::size_t rank, const ErrorLocation& where) {
  switch (op.kind) {
    case LazyOp::Kind::index: return index_tensor(t, op.index, where);
    case LazyOp::Kind::permute: {
      std::vector<std::int64_t> order = op.ints;  // the leaf's own dims follow, unmoved (add_missing_dims)
      for (std::size_t d = rank; d < t.dim(); ++d) order.push_back(static_cast<std::int64_t>(d));
      return t.permute(order);
    }
    case LazyOp::Kind::transpose: return t.transpose(op.ints[0], op.ints[1]);
    case LazyOp::Kind::unsqueeze: return t.unsqueeze(op.ints[0]);
    case LazyOp::Kind::squeeze:
      return t.sizes()[static_cast<std::size_t>(op.ints[0])] == 1 ? t.select(op.ints[0], 0) : t;
    case LazyOp::Kind::view: {
      if (!t.is_contiguous()) {
        throw UnsupportedError("view of a non-contiguous source leaf is not supported (torch may copy)", where);
      }
      Shape sizes(op.ints.begin(), op.ints.end());  // _ViewedTensorDict._update_custom_op_kwargs
      sizes.insert(sizes.end(), t.sizes().begin() + static_cast<std::ptrdiff_t>(rank), t.sizes().end());
      return t.reshape(std::move(sizes));
    }
  }
  return t;
}

/// The batch size `op` gives a collection of batch size `batch` (under a source of batch rank `rank`), computed
/// on a meta tensor as tensordict does.
inline Shape op_batch(const Shape& batch, const LazyOp& op, std::size_t rank, const ErrorLocation& where) {
  return op_tensor(Tensor::zeros(batch, DType::UInt8, Device::meta()), op, rank, where).sizes();
}

Entry op_entry(const Entry& entry, const LazyOp& op, std::size_t rank, const ErrorLocation& where);

/// An index whose item at the stack dim picks members of a lazy stack: the members picked, indexed by the rest.
inline Entry index_lazy_stack(const TensorDict& stack, const LazyOp& op, std::size_t rank, const ErrorLocation& where) {
  const Shape batch = op_batch(stack.batch_size(), op, rank, where);  // checks every item against the batch size
  const auto stack_rank = static_cast<std::int64_t>(stack.batch_size().size());
  const std::int64_t s = stack.stack_dim() < 0 ? stack.stack_dim() + stack_rank : stack.stack_dim();
  LazyOp rest;  // an index
  const BatchIndex* at_stack = nullptr;
  std::int64_t consumed = 0, produced_before = 0;
  for (const BatchIndex& item : op.index) {
    if (item.kind != BatchIndex::Kind::new_axis && consumed++ == s) {
      at_stack = &item;
      continue;
    }
    if (at_stack == nullptr && item.kind != BatchIndex::Kind::integer) ++produced_before;
    rest.index.push_back(item);
  }
  std::vector<Entry> members;
  if (at_stack == nullptr) {  // the index stops before the stack dim: every member takes it whole
    for (const auto& item : stack) members.push_back(op_entry(item.value, op, rank, where));
    TensorDict out = TensorDict::lazy_stack(std::move(members), s - consumed + produced_before);
    TensorDictAccess::set_batch_unchecked(out, batch);
    out.set_device(stack.device());
    return Entry(std::move(out));
  }
  std::vector<std::int64_t> picked;
  const auto count = static_cast<std::int64_t>(stack.size());
  if (at_stack->kind == BatchIndex::Kind::integer) {
    const std::int64_t i = at_stack->value < 0 ? at_stack->value + count : at_stack->value;
    return op_entry(stack.items()[static_cast<std::size_t>(i)].value, rest, rank, where);
  }
  if (at_stack->kind == BatchIndex::Kind::positions) {
    picked = checked_positions(*at_stack, count, where);
  } else {
    const std::int64_t stop = batch[static_cast<std::size_t>(produced_before)];  // the slice's length
    const std::int64_t start =
        std::clamp(at_stack->start < 0 ? at_stack->start + count : at_stack->start, std::int64_t{0}, count);
    for (std::int64_t i = 0; i < stop; ++i) picked.push_back(start + i * at_stack->step);
  }
  for (const std::int64_t i : picked) {
    members.push_back(op_entry(stack.items()[static_cast<std::size_t>(i)].value, rest, rank, where));
  }
  TensorDict out = TensorDict::lazy_stack(std::move(members), produced_before);
  TensorDictAccess::set_batch_unchecked(out, batch);
  out.set_device(stack.device());
  return Entry(std::move(out));
}

/// `op` applied to every leaf of `entry` (a collection of batch rank `rank`, or a leaf under one).
inline Entry op_entry(const Entry& entry, const LazyOp& op, std::size_t rank, const ErrorLocation& where) {
  switch (entry.kind()) {
    case Entry::Kind::tensor: return Entry(op_tensor(entry.as_tensor(), op, rank, where));
    case Entry::Kind::non_tensor: return entry;
    case Entry::Kind::nested_tensor: throw UnsupportedError("a lazy view over a nested tensor is not supported", where);
    case Entry::Kind::tensordict: break;
  }
  const TensorDict& td = entry.as_tensordict();
  if (td.kind() == TensorDictKind::lazy_stack) {
    if (op.kind != LazyOp::Kind::index) {
      throw UnsupportedError(op.text + " of a lazy stack is not supported (only indexing is)", where);
    }
    return index_lazy_stack(td, op, rank, where);
  }
  TensorDict out = td;
  for (const auto& item : td) TensorDictAccess::set_unchecked(out, item.key, op_entry(item.value, op, rank, where));
  TensorDictAccess::set_batch_unchecked(out, op_batch(td.batch_size(), op, rank, where));
  return Entry(std::move(out));
}

}  // namespace tensorfile::detail::td
