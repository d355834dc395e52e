// Validation of launch_swa_translate_kernel: out[i] = tr(in[i]); int64 1-D contiguous, equal
// lengths, one device.
//
// Each row starts from a valid call, breaks exactly one thing, and checks the exact message and
// that no output byte changed. Outputs start filled with 0x5A bytes, so "unchanged" is not the
// same as "still zero", and each valid baseline is shown to write.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "kvcanary/kvcanary.h"
#include "testutil.h"
#include "validation_table.h"
#include "validation_util.h"

namespace kvcanary::testing {
namespace {

// A valid call: a chain head, slot 0, an in-range slot and one past the LUT (clamps, D3).
struct SwaCase : KeptTensors {
  using OpArgs = SwaTranslateArgs;
  OpArgs Args() const { return SwaTranslateArgs{slot_indices.view(), lut.view(), out.view()}; }
  // The output, and the input an in-place call would write.
  ByteSnapshot Snapshot() { return ByteSnapshot(out, slot_indices); }
  static void Run(const SwaTranslateArgs& args) { SwaTranslate(args); }

  HostTensor<int64_t> slot_indices = HostTensor<int64_t>::Of({-1, 0, 3, 100});
  HostTensor<int64_t> lut = HostTensor<int64_t>::Of({10, 11, 12, 13, 14, 15, 16, 17});
  HostTensor<int64_t> out = Poisoned<int64_t>({4});
};

void AllOnDevice(Device device, SwaTranslateArgs& args) {
  MoveToDevice(device,
               {&args.slot_indices, &args.full_to_swa_index_mapping, &args.out_slot_indices});
}

using Row = RejectRow<SwaCase>;

const Row kRows[] = {
    {"OverlapOutShiftedOverSlotIndices",
     [](SwaCase& c, SwaTranslateArgs& a) {
       HostTensor<int64_t>& wide = c.KeepOutput(HostTensor<int64_t>({5}));
       a.slot_indices = wide.view({4});
       a.out_slot_indices = TensorView(wide.data() + 1, DType::kInt64, Device::CPU(), {4});
     },
     "kv-canary: out_slot_indices overlaps slot_indices in memory; an output needs memory of its "
     "own"},
    {"OverlapOutOverLut",
     [](SwaCase& c, SwaTranslateArgs& a) { a.out_slot_indices = c.lut.view({4}); },
     "kv-canary: out_slot_indices overlaps full_to_swa_index_mapping in memory; an output needs "
     "memory of its own"},
    {"PresenceLutMissing",
     [](SwaCase&, SwaTranslateArgs& a) { a.full_to_swa_index_mapping = TensorView(); },
     "kv-canary: full_to_swa_index_mapping is required, got None"},
    {"G1SlotIndicesNotContiguous",
     [](SwaCase& c, SwaTranslateArgs& a) {
       a.slot_indices = EveryOther(c.Keep(HostTensor<int64_t>({8})));
     },
     "kv-canary: slot_indices must be contiguous"},
    {"G1OutNotContiguous",
     [](SwaCase& c, SwaTranslateArgs& a) {
       a.out_slot_indices = EveryOther(c.KeepOutput(Poisoned<int64_t>({8})));
     },
     "kv-canary: out_slot_indices must be contiguous"},
    {"G2SlotIndicesWrongDtype",
     [](SwaCase& c, SwaTranslateArgs& a) {
       a.slot_indices = c.Keep(HostTensor<int32_t>::Of({-1, 0, 3, 100})).view();
     },
     "kv-canary: slot_indices must have dtype torch.int64, got torch.int32"},
    {"G2LutWrongDtype",
     [](SwaCase& c, SwaTranslateArgs& a) {
       a.full_to_swa_index_mapping = c.Keep(HostTensor<int32_t>({8})).view();
     },
     "kv-canary: full_to_swa_index_mapping must have dtype torch.int64, got torch.int32"},
    {"G3SlotIndicesNot1D",
     [](SwaCase& c, SwaTranslateArgs& a) {
       a.slot_indices = c.slot_indices.view({2, 2});
     },
     "kv-canary: slot_indices must be 1-D, got shape (2, 2)"},
    {"G3OutNot1D",
     [](SwaCase& c, SwaTranslateArgs& a) {
       a.out_slot_indices = c.out.view({4, 1});
     },
     "kv-canary: out_slot_indices must be 1-D, got shape (4, 1)"},
    {"G5OutLength", [](SwaCase& c, SwaTranslateArgs& a) { a.out_slot_indices = c.out.view({3}); },
     "kv-canary: out_slot_indices length must be 4, got 3"},
    {"G6EmptyLut",
     [](SwaCase& c, SwaTranslateArgs& a) { a.full_to_swa_index_mapping = c.lut.view({0}); },
     "kv-canary: full_to_swa_index_mapping length must be >= 1, got 0"},
    {"G7SlotIndicesOnOtherDevice",
     [](SwaCase&, SwaTranslateArgs& a) { a.slot_indices = OnCuda(a.slot_indices); },
     "kv-canary: slot_indices must be on out_slot_indices's device cpu, got cuda:0"},
    {"G7LutOnOtherDevice",
     [](SwaCase&, SwaTranslateArgs& a) {
       a.full_to_swa_index_mapping = OnCuda(a.full_to_swa_index_mapping);
     },
     "kv-canary: full_to_swa_index_mapping must be on out_slot_indices's device cpu, got cuda:0"},
    {"G8OutReadOnly",
     [](SwaCase& c, SwaTranslateArgs& a) { a.out_slot_indices = c.out.read_only_view(); },
     "kv-canary: out_slot_indices must be writable"},
    {"G9AllOnUnsupportedDevice",
     [](SwaCase&, SwaTranslateArgs& a) { AllOnDevice(UnsupportedDevice(), a); },
     "kv-canary: out_slot_indices is on unsupported device dlpack_device_8:0"},
#if !defined(KVC_HAVE_CUDA)
    {"G9AllOnCudaWithoutBackend",
     [](SwaCase&, SwaTranslateArgs& a) { AllOnDevice(Device::CUDA(0), a); },
     "kv-canary: out_slot_indices is on unsupported device cuda:0"},
#endif
};

KVC_REJECTION_TABLE(SwaTranslateRejects, SwaCase, kRows);

TEST(SwaTranslateValidation, ValidBaselineSucceedsAndWrites) {
  SwaCase c;
  const ByteSnapshot before = c.Snapshot();
  SwaTranslate(c.Args());
  EXPECT_FALSE(before.Unchanged());
  EXPECT_EQ(Values(c.out), (std::vector<int64_t>{-1, 10, 13, 17}));
}

TEST(SwaTranslateValidation, InPlaceSucceeds) {
  SwaCase c;
  SwaTranslate(SwaTranslateArgs{c.slot_indices.view(), c.lut.view(), c.slot_indices.view()});
  EXPECT_EQ(Values(c.slot_indices), (std::vector<int64_t>{-1, 10, 13, 17}));
}

}  // namespace
}  // namespace kvcanary::testing
