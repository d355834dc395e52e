// Sampled verify (a kvcanary addition), shared by both backends: which positions of a row's verify
// range [start, end) a forward checks when it verifies a rotating 1/K of every prefix. They are
// the positions p with (p + phase) % K == 0, an arithmetic progression of stride K, plus the
// newest position end - 1 (the predecessor of the forward's writes) when it is not one of them.
// Counting them and finding the j-th are O(1), so the work shrinks with K. Every position of the
// range is checked once in any K forwards whose phases are K consecutive integers: the phase is
// kept per request row and advanced after each forward the row is in (AdvanceVerifyPhase).
#pragma once

#include <cstdint>

#include "core/params.h"
#include "core/wrap.h"

namespace kvcanary {

// The sampled positions of one row: first + j * sample for j in [0, strided), then end - 1 when
// `tail`. Both parts are in increasing position order.
struct SampledPositions {
  int64_t first = 0;
  int64_t strided = 0;
  bool tail = false;

  KVC_HOST_DEVICE int64_t Count() const { return strided + (tail ? 1 : 0); }
};

// A phase of any value reduced into [0, sample).
KVC_HOST_DEVICE int64_t ReducePhase(int64_t phase, int64_t sample) {
  const int64_t reduced = phase % sample;
  return reduced < 0 ? reduced + sample : reduced;
}

// The residue the sampled positions of table row `rp` share: p % sample == residue. The row's
// phase is its entry of verify_phase (clamped: one entry is one phase for every row); absent, 0.
KVC_HOST_DEVICE int64_t SampleResidue(const PlanInputParams& in, int64_t rp) {
  const int64_t phase =
      in.verify_phase != nullptr ? in.verify_phase[ClampIndex(rp, in.verify_phase_len)] : 0;
  return (in.verify_sample - ReducePhase(phase, in.verify_sample)) % in.verify_sample;
}

// The sampled positions of [start, end). REQUIRES start >= 0 and sample >= 1 (so end - start
// cannot overflow when end > start); an empty range has none.
KVC_HOST_DEVICE SampledPositions SamplePositions(int64_t start, int64_t end, int64_t sample,
                                                 int64_t residue) {
  SampledPositions sampled;
  if (end <= start) return sampled;
  const int64_t length = end - start;
  const int64_t skip = ((residue - start % sample) % sample + sample) % sample;
  sampled.first = start + (skip < length ? skip : 0);
  sampled.strided = skip < length ? (length - 1 - skip) / sample + 1 : 0;
  sampled.tail = sampled.strided == 0 || skip + (sampled.strided - 1) * sample != length - 1;
  return sampled;
}

// The j-th sampled position. A j past the count (only a count above stage 1's reaches it) reads
// the newest position again: any position is memory-safe, reads are clamped.
KVC_HOST_DEVICE int64_t SampledPosition(const SampledPositions& sampled, int64_t end,
                                        int64_t sample, int64_t j) {
  if (j < sampled.strided) return WrapAdd(sampled.first, WrapMul(j, sample));
  return WrapSub(end, 1);
}

}  // namespace kvcanary
