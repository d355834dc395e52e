// The write launches that give every slot of a CaseLayout its valid record, so the records the
// timed verify reads are real chains written by the write op (timing verify over zeros would measure nothing real).
#pragma once

#include <vector>

#include "bench/cases.h"
#include "bench/device_tensor.h"
#include "bench/layout.h"
#include "bench/pool.h"

namespace kvcanary::bench {

// Built once per case; Run() once per canary buffer (and again for a TAIL buffer when the
// real-data mode changes its fingerprints).
//
// Chain i writes member i of every position's class in position order, so each record stores the
// running hash of TokenAt(0..p-1). When the new positions have larger classes than the prefix, a
// second launch writes their remaining members as seeded chains that continue from a prefix slot
// at position prefix - 1, exactly as a decode step does. No launch writes a slot twice.
class ValidRecordWriter {
 public:
  ValidRecordWriter(const Pool& pool, const CaseLayout& layout);

  void Run(CanaryLaunchTag tag, RealData mode) const;

 private:
  // One write launch: `chains` rows of the write plan, `length` tokens each.
  struct Launch {
    DeviceTensor offsets, seeds, num_valid_reqs;
    DeviceTensor input_ids, positions, out_cache_loc;
  };
  // Chains [first_chain, last_chain) over positions [first_position, positions).
  Launch MakeLaunch(const CaseLayout& layout, int64_t first_chain, int64_t last_chain,
                    int64_t first_position) const;

  const Pool* pool_;
  std::vector<Launch> launches_;
};

}  // namespace kvcanary::bench
