// SPDX-License-Identifier: MIT
/// @file
/// Parts of tensors a load reads: a slice of one dimension, the `slice` rule of the load options, and tensor-parallel
/// plans (each rank its part of each split weight, as torch.chunk or torch.tensor_split cut it).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tensorfile/config.hpp"
#include "tensorfile/core/shape.hpp"

namespace tensorfile {

/// Elements [begin, end) along dimension `dim` (negative: counted from the last), every other dimension whole:
/// what t.narrow(dim, begin, end - begin) keeps.
struct TensorSlice {
  std::int64_t dim = 0;    ///< the dimension cut
  std::int64_t begin = 0;  ///< its first index kept
  std::int64_t end = 0;    ///< one past its last index kept
};

/// Asked with each kept tensor's path and shape (the file's) before its bytes are read: the part of it to read, or
/// nullopt for all of it.
using SliceRule = std::function<std::optional<TensorSlice>(std::string_view path, const Shape& shape)>;

/// How a split dimension's extent is shared evenly among the ranks of a tensor-parallel plan.
enum class EvenSplit : std::uint8_t {
  chunk,         ///< as t.chunk(world, dim)[rank]: ceil(n / world) each; the last ranks get fewer, or none
  tensor_split,  ///< as t.tensor_split(world, dim)[rank]: n / world each, one more for the first n % world ranks
};

/// The part [begin, end) of `extent` that rank `rank` of `world` holds as `rule` shares it (empty, begin == end ==
/// extent, for a rank torch.chunk gives no chunk). world < 1, a rank outside [0, world) or a negative extent is an
/// ArgumentError.
[[nodiscard]] TENSORFILE_ENTRY TensorSlice split_extent(std::int64_t extent, std::int64_t world, std::int64_t rank,
                                                        EvenSplit rule);

/// One rule of a tensor-parallel plan: the tensors whose path matches `pattern` (a name or a glob, as
/// select_paths() matches) are split along `dim`, or read whole by every rank when `dim` is unset.
struct ParallelRule {
  std::string pattern{};              ///< the paths it applies to
  std::optional<std::int64_t> dim{};  ///< the dimension split (negative: from the last); unset: replicated
  /// Explicit extents per rank along `dim` (world of them, summing to the dimension's extent); empty: the plan's
  /// `even` split.
  std::vector<std::int64_t> sizes{};
};

/// Which part of each tensor one rank of a tensor-parallel group reads: the first rule whose pattern matches a path
/// decides; a path no rule matches is replicated (read whole).
struct ParallelPlan {
  std::int64_t world = 1;                    ///< ranks in the group
  std::int64_t rank = 0;                     ///< this rank, in [0, world)
  std::vector<ParallelRule> rules{};         ///< in order of precedence
  EvenSplit even = EvenSplit::tensor_split;  ///< how an extent is shared where a rule gives no sizes
};

/// A tensor-parallel group loaded at once, every rank to a device of its own (cuda::load_ranks): the plan (its `rank`
/// is not read: every rank is loaded) and the devices in rank order, `{"cuda:0", "cuda:1", ...}`.
struct ParallelDevices {
  ParallelPlan plan{};                 ///< the group's world, rules and even split
  std::vector<std::string> devices{};  ///< rank r's device at index r ("cuda", "cuda:N"): plan.world of them
};

/// The SliceRule of `plan` (for LoadOptions::slice): rank `plan.rank`'s slice of every split tensor, nullopt for the
/// replicated ones. A bad plan (world, rank, a sizes list of the wrong length) is an ArgumentError here; a rule
/// that does not fit a tensor (a dimension it lacks, sizes that do not sum to its extent) is an ArgumentError
/// naming the path when the load asks.
[[nodiscard]] TENSORFILE_ENTRY SliceRule parallel_slices(ParallelPlan plan);

/// Rules written as text, for the command line: comma-separated `pattern=dim` (split along dim),
/// `pattern=dim:s0/s1/...` (explicit extents per rank) or `pattern=replicate`;
/// "*.q_proj.weight=0,*.o_proj.weight=1,*=replicate". Malformed text is an ArgumentError naming the rule.
[[nodiscard]] TENSORFILE_ENTRY std::vector<ParallelRule> parse_parallel_rules(std::string_view text);

}  // namespace tensorfile

#if TENSORFILE_DEFINITIONS_OF(formats_slice)
#include <algorithm>
#include <charconv>
#include <numeric>
#include <utility>

#include "tensorfile/core/error.hpp"
#include "tensorfile/detail/text/glob.hpp"

namespace tensorfile {

TENSORFILE_ENTRY TensorSlice split_extent(std::int64_t extent, std::int64_t world, std::int64_t rank, EvenSplit rule) {
  if (world < 1 || rank < 0 || rank >= world || extent < 0) {
    throw ArgumentError("cannot split an extent of " + std::to_string(extent) + " for rank " + std::to_string(rank) +
                        " of " + std::to_string(world) + "; expected world >= 1, 0 <= rank < world, extent >= 0");
  }
  if (rule == EvenSplit::chunk) {
    const std::int64_t each = extent == 0 ? 0 : (extent + world - 1) / world;
    const std::int64_t begin = std::min(extent, rank * each);
    return {0, begin, std::min(extent, begin + each)};
  }
  const std::int64_t each = extent / world;
  const std::int64_t more = extent % world;
  const std::int64_t begin = rank * each + std::min(rank, more);
  return {0, begin, begin + each + (rank < more ? 1 : 0)};
}

TENSORFILE_ENTRY SliceRule parallel_slices(ParallelPlan plan) {
  if (plan.world < 1 || plan.rank < 0 || plan.rank >= plan.world) {
    throw ArgumentError("the plan's rank is " + std::to_string(plan.rank) + " of " + std::to_string(plan.world) +
                        "; expected world >= 1 and 0 <= rank < world");
  }
  for (const ParallelRule& rule : plan.rules) {
    if (!rule.sizes.empty() && static_cast<std::int64_t>(rule.sizes.size()) != plan.world) {
      throw ArgumentError("the rule \"" + rule.pattern + "\" gives " + std::to_string(rule.sizes.size()) +
                          " sizes; expected one per rank, " + std::to_string(plan.world));
    }
    for (const std::int64_t size : rule.sizes) {
      if (size < 0) throw ArgumentError("the rule \"" + rule.pattern + "\" gives a negative size; expected >= 0");
    }
  }
  return [plan = std::move(plan)](std::string_view path, const Shape& shape) -> std::optional<TensorSlice> {
    for (const ParallelRule& rule : plan.rules) {
      if (!detail::glob_match(rule.pattern, path)) continue;
      if (!rule.dim) return std::nullopt;
      const auto rank = static_cast<std::int64_t>(shape.size());
      const std::int64_t dim = *rule.dim < 0 ? *rule.dim + rank : *rule.dim;
      if (dim < 0 || dim >= rank) {
        throw ArgumentError("the rule \"" + rule.pattern + "\" splits dimension " + std::to_string(*rule.dim) +
                            " of \"" + std::string(path) + "\", which has " + std::to_string(rank) +
                            "; expected a dimension it has (or a rule that replicates it)");
      }
      const std::int64_t extent = shape[static_cast<std::size_t>(dim)];
      if (rule.sizes.empty()) {
        TensorSlice slice = split_extent(extent, plan.world, plan.rank, plan.even);
        slice.dim = dim;
        return slice;
      }
      const std::int64_t total = std::accumulate(rule.sizes.begin(), rule.sizes.end(), std::int64_t{0});
      if (total != extent) {
        throw ArgumentError("the rule \"" + rule.pattern + "\" gives sizes summing to " + std::to_string(total) +
                            " for dimension " + std::to_string(dim) + " of \"" + std::string(path) +
                            "\"; expected its extent, " + std::to_string(extent));
      }
      const auto first = rule.sizes.begin();
      const std::int64_t begin = std::accumulate(first, first + plan.rank, std::int64_t{0});
      return TensorSlice{dim, begin, begin + rule.sizes[static_cast<std::size_t>(plan.rank)]};
    }
    return std::nullopt;
  };
}

namespace detail {

/// The integer `text` spells whole (an optional '-' and digits), or nullopt.
[[nodiscard]] inline std::optional<std::int64_t> parse_rule_integer(std::string_view text) {
  std::int64_t value = 0;
  const char* end = text.data() + text.size();
  const auto [stop, error] = std::from_chars(text.data(), end, value);
  if (text.empty() || error != std::errc{} || stop != end) return std::nullopt;
  return value;
}

}  // namespace detail

TENSORFILE_ENTRY std::vector<ParallelRule> parse_parallel_rules(std::string_view text) {
  std::vector<ParallelRule> rules;
  while (!text.empty()) {
    const std::size_t comma = text.find(',');
    const std::string_view item = text.substr(0, comma);
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
    const std::size_t equals = item.rfind('=');
    const auto refuse = [&](const std::string& why) {
      throw ArgumentError("the split rule \"" + std::string(item) + "\" " + why +
                          "; expected pattern=dim, pattern=dim:s0/s1/... or pattern=replicate");
    };
    if (equals == std::string_view::npos || equals == 0) refuse("has no pattern=");
    ParallelRule rule{std::string(item.substr(0, equals))};
    const std::string_view how = item.substr(equals + 1);
    if (how != "replicate") {
      const std::size_t colon = how.find(':');
      rule.dim = detail::parse_rule_integer(how.substr(0, colon));
      if (!rule.dim) refuse("names no dimension");
      std::string_view sizes = colon == std::string_view::npos ? std::string_view() : how.substr(colon + 1);
      if (colon != std::string_view::npos && sizes.empty()) refuse("has no sizes after ':'");
      while (!sizes.empty()) {
        const std::size_t slash = sizes.find('/');
        const std::optional<std::int64_t> size = detail::parse_rule_integer(sizes.substr(0, slash));
        if (!size || *size < 0) refuse("has a size that is not a whole number");
        rule.sizes.push_back(*size);
        sizes = slash == std::string_view::npos ? std::string_view() : sizes.substr(slash + 1);
      }
    }
    rules.push_back(std::move(rule));
  }
  return rules;
}

}  // namespace tensorfile
#endif  // TENSORFILE_DEFINITIONS_OF(formats_slice)
