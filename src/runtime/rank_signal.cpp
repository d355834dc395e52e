#include "kvcanary/runtime/rank_signal.h"

#include "kvcanary/error.h"

#ifdef KVC_HAVE_NCCL
#include <cuda_runtime.h>
#include <nccl.h>
#endif

namespace kvcanary::runtime {

#ifdef KVC_HAVE_NCCL
namespace {

class NcclReducer final : public ViolationSignalReducer {
 public:
  explicit NcclReducer(ncclComm_t comm) : comm_(comm) {}
  void AllReduceMax(const TensorView& value, StreamHandle stream) override {
    const ncclResult_t status = ncclAllReduce(value.data(), value.data(), 1, ncclInt32, ncclMax,
                                              comm_, static_cast<cudaStream_t>(stream));
    if (status != ncclSuccess) {
      ThrowError("kv-canary: ncclAllReduce of the violation signal failed: ",
                 ncclGetErrorString(status));
    }
  }

 private:
  ncclComm_t comm_;
};

}  // namespace

bool NcclReducerAvailable() { return true; }

std::unique_ptr<ViolationSignalReducer> MakeNcclReducer(void* nccl_comm) {
  if (nccl_comm == nullptr) ThrowError("kv-canary: MakeNcclReducer needs a communicator, got null");
  return std::make_unique<NcclReducer>(static_cast<ncclComm_t>(nccl_comm));
}
#else
bool NcclReducerAvailable() { return false; }

std::unique_ptr<ViolationSignalReducer> MakeNcclReducer(void*) {
  ThrowError("kv-canary: this build of kvcanary has no NCCL (built without the CUDA toolkit's "
             "nccl.h and libnccl)");
}
#endif

}  // namespace kvcanary::runtime
