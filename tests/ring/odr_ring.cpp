// SPDX-License-Identifier: MIT
// A second translation unit including the ring headers: the link fails if one defines a non-inline function.
#include <tensorfile/detail/ring_load.hpp>
#include <tensorfile/detail/ring_plan.hpp>
#include <tensorfile/detail/ring_reader.hpp>
#include <tensorfile/detail/ring_scheduler.hpp>

#include "ring/fake_copy_engine.hpp"
#include "ring/value_map.hpp"

namespace ring_odr_test {
std::size_t segments_from_second_unit() {
  const std::vector<tensorfile::detail::RingRange> ranges = {{0, 10}, {64, 10}};
  return tensorfile::detail::plan_ring_layout(ranges, true).segments.size();
}
}  // namespace ring_odr_test
