// The differential sweep's cases .
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "sweep_case.h"

namespace kvcanary::testing {

// Each shape's variants 1 and 6 again over a paged block table: int32 ids in blocks of 16, and
// int64 ids in blocks of 5 (not a power of two).
inline std::vector<SweepCase> PagedCases(const std::vector<SweepCase>& sweep) {
  std::vector<SweepCase> paged;
  for (const SweepCase& base : sweep) {
    const bool wide = base.name.ends_with("Variant6");
    if (!wide && !base.name.ends_with("Variant1")) continue;
    SweepCase c = base;
    c.name += wide ? "PagedInt64Block5" : "PagedInt32Block16";
    c.seed += 500;
    c.block_size = wide ? 5 : 16;
    c.wide_block_ids = wide;
    c.strided_table = false;
    paged.push_back(std::move(c));
  }
  return paged;
}

// Each shape's variants 2 and 5 again with sampled verify at K = 2, 3, 8 or 16 (cycling), one
// phase per table row, or now and then one phase for all rows.
inline std::vector<SweepCase> SampledCases(const std::vector<SweepCase>& sweep) {
  constexpr int64_t kSamples[] = {2, 3, 8, 16};
  std::vector<SweepCase> sampled;
  for (const SweepCase& base : sweep) {
    if (!base.name.ends_with("Variant2") && !base.name.ends_with("Variant5")) continue;
    SweepCase c = base;
    const auto index = static_cast<int64_t>(sampled.size());
    c.verify_sample = kSamples[index % 4];
    c.one_phase = index % 5 == 4;
    c.name += "SampledK" + std::to_string(c.verify_sample);
    c.seed += 700;
    sampled.push_back(std::move(c));
  }
  return sampled;
}

// The sweep: shapes over bs {1, 31, 32, 33, 128, 5000}, prefix {0, 1, 127, 128, 129, 4096} and
// extend {1, 128, 4096}, each in eight variants that rotate the other knobs so that every value
// of every knob meets several shapes (a covering subset, not the full cross product).
inline std::vector<SweepCase> SweepCases() {
  struct Shape {
    int64_t bs;
    std::vector<int64_t> prefixes, extends;
  };
  const std::vector<Shape> shapes = {
      {1, {0}, {1}},
      {1, {1}, {1}},
      {1, {127}, {128}},
      {1, {128}, {4096}},
      {1, {129}, {1}},
      {1, {4096}, {1, 128, 4096}},
      {31, {0, 1, 127, 128, 129}, {1, 128}},
      {32, {1, 127, 128, 129}, {1}},
      {33, {128, 129, 4096}, {1, 128}},
      {128, {0, 1, 127, 128, 129, 4096}, {1}},
      {128, {0, 1, 127, 128, 129}, {1, 128, 4096}},
      {5000, {0, 1, 127, 128, 129}, {1}},
      {5000, {1}, {1, 128}},
  };
  const LutKind luts[] = {LutKind::kNone, LutKind::kIdentity, LutKind::kShift100,
                          LutKind::kPermutation, LutKind::kPermutationOutOfRange};
  const int64_t windows[] = {0, 128, 1};
  const PaddingKind paddings[] = {PaddingKind::kNone, PaddingKind::kTrailing,
                                  PaddingKind::kInterleaved};
  const CapacityKind capacities[] = {CapacityKind::kLoose, CapacityKind::kTight,
                                     CapacityKind::kOneShort};
  const RealKvHashMode modes[] = {RealKvHashMode::kNone, RealKvHashMode::kPartial,
                                  RealKvHashMode::kAll};
  const int64_t strides[] = {32, 32, 32, 32, 32, 48, 40, 32};
  std::vector<SweepCase> cases;
  for (int s = 0; s < static_cast<int>(shapes.size()); ++s) {
    for (int v = 0; v < 8; ++v) {
      SweepCase c;
      c.name = "Bs" + std::to_string(shapes[s].bs) + "Shape" + std::to_string(s) + "Variant" +
               std::to_string(v);
      c.seed = 0x6B7663ull * 1000 + static_cast<uint64_t>(s * 8 + v);
      c.bs = shapes[s].bs;
      c.prefixes = shapes[s].prefixes;
      c.extends = shapes[s].extends;
      c.lut = luts[(v + s) % 5];
      c.window = c.lut == LutKind::kNone ? 0 : windows[(v + 2 * s) % 3];
      c.table = (v + s) % 2 == 0 ? TableKind::kLinear : TableKind::kSparsePermuted;
      c.strided_table = (v + s) % 3 == 1;
      c.padding = paddings[(v / 2 + s) % 3];
      c.capacity = capacities[(v + s / 2) % 3];
      c.num_sources = (3 * v + s) % 5;
      c.mode = modes[(v + 2 * s) % 3];
      c.random_kv_bytes = (v + s) % 3 != 0;
      c.kv_row_padding = v % 2 == 0;
      c.slot_stride_bytes = strides[v];
      c.token_pool = v % 4 != 0;
      c.pool_offset = v % 4 == 3 ? 1 : 0;
      c.corrupt = v % 3 != 2;
      c.skips = v % 4 == 2;
      c.input_assert = v % 2 == 1;
      c.chain_assert = (v + s) % 3 == 0;
      c.scratch = v != 7;
      c.paired = (v + s) % 4 == 1;
      cases.push_back(std::move(c));
    }
  }
  std::vector<SweepCase> paged = PagedCases(cases);
  std::vector<SweepCase> sampled = SampledCases(cases);
  cases.insert(cases.end(), paged.begin(), paged.end());
  cases.insert(cases.end(), sampled.begin(), sampled.end());
  return cases;
}

}  // namespace kvcanary::testing
