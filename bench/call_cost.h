// What one op call costs the host: the argument checks, the dispatch and the launch (or, on the
// CPU, the work of a one-entry call), measured on the smallest valid call so that the op's own
// work does not hide it. This is the price every call pays before any byte moves.
#pragma once

#include <string>
#include <vector>

#include "bench/cases.h"
#include "bench/device.h"
#include "bench/parallel.h"
#include "bench/pool.h"

namespace kvcanary::bench {

struct CallCost {
  std::string op;
  TimingStats per_call;  // µs per call: each sample is the mean of one batch of calls
};

// Times Plan, the offsets-only Plan, Verify, FusedVerify and Write on one request with a
// one-token prefix and a one-token extend, with the host's steady clock (CUDA launches are
// asynchronous: the device is synchronised between batches, outside the timed region).
std::vector<CallCost> MeasureCallCosts(BenchDevice& device, const Pool& pool, const Suite& suite,
                                       Rng& rng, int reps);

}  // namespace kvcanary::bench
