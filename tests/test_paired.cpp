// Paired K/V launches: one Verify or Write call with `paired_context` equals two calls, K then V.
#include <gtest/gtest.h>

#include "kvcanary/kvcanary.h"
#include "testutil.h"

namespace kvcanary {
namespace {

using testing::ByteSnapshot;
using testing::CanaryState;
using testing::HostTensor;
using testing::PlanBuffers;

constexpr int64_t kSlots = 64;
constexpr int64_t kHeadK = static_cast<int64_t>(CanaryLaunchTag::kHeadKFull);
constexpr int64_t kHeadV = static_cast<int64_t>(CanaryLaunchTag::kHeadVFull);

// Two rows (rp 1 and 2) with prefixes 5 and 3, each writing 2 tokens; K and V buffers share the
// ring and write index as a runtime's do, and have their own counters.
struct PairedWorld {
  PairedWorld() : k_(kSlots), v_(kSlots), plan_(16, 2) {
    testing::FillArbitraryPair(k_, v_, 7);  // verify finds rows
    plan_.num_valid[0] = 8;
    for (int e = 0; e < 8; ++e) {
      plan_.slots[e] = 1 + e;
      plan_.prevs[e] = e;
      plan_.positions[e] = e;
    }
    plan_.offsets.values() = {0, 2, 4};
    plan_.seeds.values() = {5, 9};
    plan_.num_valid_reqs[0] = 2;
    k_.chain_assert[0] = v_.chain_assert[0] = 1;
  }

  // V shares K's ring and write index.
  LaunchContext VContext() const {
    LaunchContext context = v_.Context(kHeadV);
    context.violation_ring = k_.ring.view();
    context.violation_write_index = k_.write_index.view();
    return context;
  }

  WriteArgs MakeWrite(const LaunchContext& context) {
    return WriteCallOver(context, plan_, ids_.view(), positions_.view(), slots_.view());
  }

  CanaryState k_, v_;
  PlanBuffers plan_;
  HostTensor<int64_t> ids_ = HostTensor<int64_t>::Of({7, 8, 9, 10});
  HostTensor<int64_t> positions_ = HostTensor<int64_t>::Of({5, 7, 3, 4});
  HostTensor<int64_t> slots_ = HostTensor<int64_t>::Of({20, -1, 30, 31});
};

// The world under test, and a twin driven by separate K and V launches.
class PairedLaunch : public ::testing::Test, protected PairedWorld {
 protected:
  PairedWorld separate;
};

TEST_F(PairedLaunch, PairedWriteEqualsKThenV) {
  Write(separate.MakeWrite(separate.k_.Context(kHeadK)));
  Write(separate.MakeWrite(separate.VContext()));

  WriteArgs paired = MakeWrite(k_.Context(kHeadK));
  paired.paired_context = VContext();
  Write(paired);

  EXPECT_EQ(k_.canary.values(), separate.k_.canary.values());
  EXPECT_EQ(v_.canary.values(), separate.v_.canary.values());
  EXPECT_EQ(k_.rows(), separate.k_.rows());
  ASSERT_GE(k_.rows().size(), 2u);  // chain-position rows from both halves, K first
  EXPECT_EQ(k_.rows().front().kernel_kind, kHeadK);
  EXPECT_EQ(k_.rows().back().kernel_kind, kHeadV);
  EXPECT_EQ(v_.kernel_run_counter[0], 1);
  EXPECT_EQ(v_.slot_run_counter[0], 3);
  EXPECT_EQ(k_.slot_run_counter[0], 3);
}

TEST_F(PairedLaunch, PairedVerifyEqualsKThenV) {
  Verify(VerifyArgs{separate.k_.Context(kHeadK), separate.plan_.verify(), false});
  Verify(VerifyArgs{separate.VContext(), separate.plan_.verify(), false});

  VerifyArgs paired{k_.Context(kHeadK), plan_.verify(), false};
  paired.paired_context = VContext();
  Verify(paired);

  EXPECT_EQ(k_.rows(), separate.k_.rows());
  EXPECT_FALSE(k_.rows().empty());
  EXPECT_EQ(k_.write_index[0], separate.k_.write_index[0]);
  EXPECT_EQ(v_.slot_run_counter[0], 8);
  EXPECT_EQ(v_.kernel_run_counter[0], 1);
}

// With the shared ring nearly full, K's first rows take its last places and everything after them
// (K's other rows, all of V's) only advances the write index, as two launches would.
TEST_F(PairedLaunch, PairedVerifyIntoANearlyFullRingEqualsKThenV) {
  const int32_t start = static_cast<int32_t>(k_.ring.shape()[0]) - 2;
  separate.k_.write_index[0] = start;
  k_.write_index[0] = start;
  Verify(VerifyArgs{separate.k_.Context(kHeadK), separate.plan_.verify(), false});
  const int32_t after_k = separate.k_.write_index[0];
  Verify(VerifyArgs{separate.VContext(), separate.plan_.verify(), false});
  ASSERT_GT(after_k - start, 2) << "K alone must overflow the ring";
  ASSERT_GT(separate.k_.write_index[0], after_k) << "V must report rows too";

  VerifyArgs paired{k_.Context(kHeadK), plan_.verify(), false};
  paired.paired_context = VContext();
  Verify(paired);

  EXPECT_EQ(k_.write_index[0], separate.k_.write_index[0]);
  EXPECT_EQ(k_.ring.values(), separate.k_.ring.values());
}

TEST_F(PairedLaunch, BadPairedContextRaisesBeforeEitherHalfIsWritten) {
  HostTensor<uint8_t> narrow({kSlots, 16});
  LaunchContext bad = VContext();
  bad.canary_buf = narrow.view();
  WriteArgs args = MakeWrite(k_.Context(kHeadK));
  args.paired_context = bad;
  ByteSnapshot snapshot(k_.canary, v_.canary, k_.ring, k_.write_index, k_.kernel_run_counter,
                        k_.slot_run_counter);
  EXPECT_KVC_ERROR(Write(args),
                   "kv-canary: canary_write: slot_stride_bytes must hold at least 32 bytes per "
                   "slot, got 16");
  EXPECT_TRUE(snapshot.Unchanged());

  VerifyArgs verify{k_.Context(kHeadK), plan_.verify(), false};
  verify.paired_context = bad;
  EXPECT_KVC_ERROR(Verify(verify),
                   "kv-canary: canary_verify: slot_stride_bytes must hold at least 32 bytes per "
                   "slot, got 16");
  EXPECT_TRUE(snapshot.Unchanged());
}

TEST_F(PairedLaunch, PairOfOneBufferRaises) {
  LaunchContext same = VContext();
  same.canary_buf = k_.canary.view();
  WriteArgs args = MakeWrite(k_.Context(kHeadK));
  args.paired_context = same;
  ByteSnapshot snapshot(k_.canary, k_.ring, k_.write_index);
  EXPECT_KVC_ERROR(
      Write(args),
      "kv-canary: paired_context.canary_buf must be a different buffer from canary_buf");
  VerifyArgs verify{k_.Context(kHeadK), plan_.verify(), false};
  verify.paired_context = same;
  EXPECT_KVC_ERROR(
      Verify(verify),
      "kv-canary: paired_context.canary_buf must be a different buffer from canary_buf");
  EXPECT_TRUE(snapshot.Unchanged());
}

}  // namespace
}  // namespace kvcanary
