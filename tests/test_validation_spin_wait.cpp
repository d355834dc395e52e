// Validation of SpinWait (the jitter fuzzer's delay): presence and bounds, then the op's own
// checks in order: dtype, device, contiguity, shape. Each row starts from a valid call, breaks one
// thing, and asserts the exact message and that nothing changed; then the CPU backend's no-op.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <limits>
#include <string>

#include "kvcanary/spin_wait.h"
#include "reject_rows.h"
#include "testutil.h"
#include "validation_table.h"
#include "validation_util.h"

namespace kvcanary::testing {
namespace {

struct SpinWaitCase : KeptTensors {
  using OpArgs = SpinWaitArgs;
  OpArgs Args() const { return SpinWaitArgs{cycles.view()}; }
  ByteSnapshot Snapshot() { return ByteSnapshot(cycles); }
  static void Run(const SpinWaitArgs& args) { SpinWait(args); }

  // Three values: rows that need a longer or strided tensor view a prefix of it.
  HostTensor<int64_t> cycles = HostTensor<int64_t>::Of({1000, 2000, 3000});
};

using Row = RejectRow<SpinWaitCase>;

constexpr const char* kPrefix = "kv-canary: jitter: cycles ";

std::string Message(const std::string& rest) { return std::string(kPrefix) + rest; }

const Row kRows[] = {
    {"AbsentCycles", [](SpinWaitCase&, SpinWaitArgs& a) { a.cycles = TensorView(); },
     "kv-canary: cycles is required, got None"},
    {"BoundsNegativeSize",
     [](SpinWaitCase& c, SpinWaitArgs& a) {
       a.cycles = TensorView(c.cycles.data(), DType::kInt64, Device::CPU(), {-1}, {1});
     },
     "kv-canary: cycles must have non-negative sizes, got shape (-1,)"},
    // J1: dtype.
    {"J1CyclesInt32",
     [](SpinWaitCase& c, SpinWaitArgs& a) { a.cycles = Recast(c.cycles, DType::kInt32); },
     Message("must be int64, got torch.int32")},
    {"J1CyclesFloat64",
     [](SpinWaitCase& c, SpinWaitArgs& a) { a.cycles = Recast(c.cycles, DType::kFloat64); },
     Message("must be int64, got torch.float64")},
    {"J1DTypeIsCheckedBeforeTheDevice",
     [](SpinWaitCase& c, SpinWaitArgs& a) {
       a.cycles = Recast(c.cycles, DType::kUInt64, UnsupportedDevice());
     },
     Message("must be int64, got torch.uint64")},
    // J2: a device that is neither CUDA nor the CPU (whose backend is the no-op).
    {"J2CyclesOnAnUnsupportedDevice",
     [](SpinWaitCase& c, SpinWaitArgs& a) {
       a.cycles = Recast(c.cycles, DType::kInt64, UnsupportedDevice());
     },
     Message("must live on CUDA, got dlpack_device_8:0")},
    // J3: contiguity, before the shape (every [1] tensor is contiguous by torch's rule).
    {"J3CyclesStrided",
     [](SpinWaitCase& c, SpinWaitArgs& a) { a.cycles = c.cycles.view({2}, {2}); },
     Message("must be contiguous")},
    // J4: shape.
    {"J4CyclesTwoValues",
     [](SpinWaitCase& c, SpinWaitArgs& a) { a.cycles = c.cycles.view({2}); },
     Message("must have shape [1], got (2,)")},
    {"J4CyclesEmpty", [](SpinWaitCase& c, SpinWaitArgs& a) { a.cycles = c.cycles.view({0}); },
     Message("must have shape [1], got (0,)")},
    {"J4CyclesScalar", [](SpinWaitCase& c, SpinWaitArgs& a) { a.cycles = c.cycles.view({}); },
     Message("must have shape [1], got ()")},
    {"J4CyclesTwoDimensional",
     [](SpinWaitCase& c, SpinWaitArgs& a) { a.cycles = c.cycles.view({1, 1}); },
     Message("must have shape [1], got (1, 1)")},
#if !defined(KVC_HAVE_CUDA)
    // A valid CUDA tensor in a CPU-only build: the dispatch's refusal, as for every op.
    {"G9CudaWithoutTheCudaBackend",
     [](SpinWaitCase& c, SpinWaitArgs& a) { a.cycles = OnCuda(c.cycles.view({1})); },
     "kv-canary: cycles is on unsupported device cuda:0"},
#endif
};

KVC_REJECTION_TABLE(SpinWaitRejects, SpinWaitCase, kRows);

// The CPU backend is a no-op: even the largest tick count returns at once and changes nothing.
TEST(SpinWaitValidation, CpuIsANoOpWhateverTheTicks) {
  for (const int64_t ticks : {int64_t{-5}, int64_t{0}, int64_t{1}, kMaxSpinWaitCycles,
                              std::numeric_limits<int64_t>::max()}) {
    HostTensor<int64_t> cycles = HostTensor<int64_t>::Of({ticks});
    const auto start = std::chrono::steady_clock::now();
    SpinWait(SpinWaitArgs{cycles.view()});
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(50));
    EXPECT_EQ(cycles.values()[0], ticks);
  }
}

}  // namespace
}  // namespace kvcanary::testing
