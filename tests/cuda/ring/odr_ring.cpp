// SPDX-License-Identifier: MIT
// A second translation unit including the ring headers: the link fails if one defines a non-inline function.
#include <tensorfile/cuda/detail/device_guard.hpp>
#include <tensorfile/cuda/detail/ring_load.hpp>
#include <tensorfile/cuda/detail/ring_plan.hpp>
#include <tensorfile/cuda/detail/ring_ranks.hpp>
#include <tensorfile/cuda/detail/ring_reader.hpp>
#include <tensorfile/cuda/detail/ring_scheduler.hpp>

#include "cuda/ring/fake_copy_engine.hpp"
#include "cuda/ring/value_map.hpp"

namespace ring_odr_test {
std::size_t segments_from_second_unit() {
  const std::vector<tensorfile::detail::RingRange> ranges = {{0, 10}, {64, 10}};
  return tensorfile::detail::plan_ring_layout(ranges, true).segments.size();
}
}  // namespace ring_odr_test
