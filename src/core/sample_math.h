// Sampled verify (a kvcanary addition), shared by both backends: which positions of a row's verify
// range [start, end) a forward checks when it verifies a rotating 1/K of every prefix. Positions
// come in runs of R = kVerifySampleRun: run b holds [b * R, (b + 1) * R). The forward checks the
// positions of the runs b with (b + phase) % K == 0, plus the newest position end - 1 (the
// predecessor of the forward's writes) when its run is not one of them. Runs keep the reads
// contiguous: consecutive entries share table sectors and each entry's predecessor record is its
// neighbour's, so a sampled entry costs what a full verify's entry costs. Counting the positions
// and finding the j-th are O(1), so the work shrinks with K. Every position of the range is
// checked once in any K forwards whose phases are K consecutive integers: the phase is kept per
// request row and advanced after each forward the row is in (AdvanceVerifyPhase).
#pragma once

#include <cstdint>

#include "core/params.h"
#include "core/wrap.h"
#include "kvcanary/plan.h"

namespace kvcanary {

// The sampled positions of one row, in increasing order: runs first_run, first_run + K, ... (runs
// of them) clipped to [start, end) (the first `skip` positions of the first run lie before
// start), `strided` positions in all; then end - 1 when `tail`.
struct SampledPositions {
  int64_t first_run = 0;
  int64_t skip = 0;
  int64_t strided = 0;
  bool tail = false;

  KVC_HOST_DEVICE int64_t Count() const { return strided + (tail ? 1 : 0); }
};

// a % b for a >= 0 and b >= 1, in 32 bits when a fits: a 64-bit division is tens of instructions
// on a GPU, and every derived entry divides.
KVC_HOST_DEVICE int64_t RemainderOf(int64_t a, int64_t b) {
  if (a <= 0xFFFFFFFFll) return static_cast<uint32_t>(a) % static_cast<uint32_t>(b);
  return a % b;
}
// a / b for a >= 0 and b >= 1, likewise.
KVC_HOST_DEVICE int64_t QuotientOf(int64_t a, int64_t b) {
  if (a <= 0xFFFFFFFFll) return static_cast<uint32_t>(a) / static_cast<uint32_t>(b);
  return a / b;
}

// A phase of any value reduced into [0, sample).
KVC_HOST_DEVICE int64_t ReducePhase(int64_t phase, int64_t sample) {
  const int64_t reduced = phase % sample;
  return reduced < 0 ? reduced + sample : reduced;
}

// The residue the sampled runs of table row `rp` share: run % sample == residue. The row's phase
// is its entry of verify_phase (clamped: one entry is one phase for every row); absent, 0.
KVC_HOST_DEVICE int64_t SampleResidue(const PlanInputParams& in, int64_t rp) {
  const int64_t phase =
      in.verify_phase != nullptr ? in.verify_phase[ClampIndex(rp, in.verify_phase_len)] : 0;
  const int64_t reduced =
      phase >= 0 ? RemainderOf(phase, in.verify_sample) : ReducePhase(phase, in.verify_sample);
  return reduced == 0 ? 0 : in.verify_sample - reduced;
}

// The sampled positions of [start, end). REQUIRES start >= 0 and sample >= 1 (so no difference
// below overflows when end > start); an empty range has none.
KVC_HOST_DEVICE SampledPositions SamplePositions(int64_t start, int64_t end, int64_t sample,
                                                 int64_t residue) {
  constexpr int64_t kRun = kVerifySampleRun;
  SampledPositions sampled;
  if (end <= start) return sampled;
  const int64_t first_touched = start / kRun;
  const int64_t last_touched = (end - 1) / kRun;
  int64_t ahead = residue - RemainderOf(first_touched, sample);  // in (-sample, sample)
  if (ahead < 0) ahead += sample;
  const int64_t span = last_touched - first_touched;  // runs after the first touched one
  sampled.first_run = first_touched + ahead;
  const int64_t runs = ahead <= span ? QuotientOf(span - ahead, sample) + 1 : 0;
  sampled.tail = runs == 0 || (span - ahead) != (runs - 1) * sample;
  if (runs == 0) return sampled;
  sampled.skip = ahead == 0 ? start - first_touched * kRun : 0;
  const int64_t clip_back = sampled.tail ? 0 : kRun - 1 - (end - 1) % kRun;
  sampled.strided = runs * kRun - sampled.skip - clip_back;
  return sampled;
}

// The j-th sampled position. A j past the count (only a count above stage 1's reaches it) reads
// the newest position again: any position is memory-safe, reads are clamped.
KVC_HOST_DEVICE int64_t SampledPosition(const SampledPositions& sampled, int64_t end,
                                        int64_t sample, int64_t j) {
  constexpr int64_t kRun = kVerifySampleRun;
  if (j < 0 || j >= sampled.strided) return WrapSub(end, 1);
  const int64_t index = j + sampled.skip;
  const int64_t run = WrapAdd(sampled.first_run, WrapMul(index / kRun, sample));
  return WrapAdd(WrapMul(run, kRun), index % kRun);
}

}  // namespace kvcanary
