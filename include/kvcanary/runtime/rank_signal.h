// The error-flag all-reduce across ranks: in raise mode one tensor-parallel
// rank that stops while its peers block in a collective hangs the job, so with
// KVCANARY_ALLREDUCE_VIOLATION_SIGNAL every rank learns, one step late like its own violations,
// that some rank saw one, and raises too.
#pragma once

#include <memory>

#include "kvcanary/tensor.h"

namespace kvcanary::runtime {

class ViolationSignalReducer {
 public:
  virtual ~ViolationSignalReducer() = default;
  // Replaces `value` (int32 [1] on the runtime's device: this rank's violation count) by its
  // maximum over the ranks, enqueued on `stream` (graph- and host-sync-free where possible).
  virtual void AllReduceMax(const TensorView& value, StreamHandle stream) = 0;
};

// One process, one rank: the local value is already the global one.
class SingleRankReducer final : public ViolationSignalReducer {
 public:
  void AllReduceMax(const TensorView&, StreamHandle) override {}
};

// NCCL: all-reduce over the engine's communicator (an ncclComm_t, passed opaquely so this
// header needs no NCCL). Available when the library was built with NCCL (KVC_HAVE_NCCL);
// otherwise MakeNcclReducer throws kvcanary::Error.
bool NcclReducerAvailable();
std::unique_ptr<ViolationSignalReducer> MakeNcclReducer(void* nccl_comm);

}  // namespace kvcanary::runtime
