// Validation of launch_swa_translate_kernel (spec/kernels.md §11): out[i] = tr(in[i]); int64
// 1-D contiguous, equal lengths, one device.
//
// Each test starts from a valid call, breaks exactly one thing, and checks the exact message and
// that no output byte changed. Outputs start filled with 0x5A bytes, so "unchanged" is not the
// same as "still zero", and each valid baseline is shown to write.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "kvcanary/kvcanary.h"
#include "testutil.h"
#include "validation_util.h"

namespace kvcanary::testing {
namespace {

// A valid call: a chain head, slot 0, an in-range slot and one past the LUT (clamps, D3).
struct SwaCase {
  SwaTranslateArgs Args() const {
    return SwaTranslateArgs{slot_indices.view(), lut.view(), out.view()};
  }
  ByteSnapshot Snapshot() { return ByteSnapshot(out, slot_indices); }

  HostTensor<int64_t> slot_indices = HostTensor<int64_t>::Of({-1, 0, 3, 100});
  HostTensor<int64_t> lut = HostTensor<int64_t>::Of({10, 11, 12, 13, 14, 15, 16, 17});
  HostTensor<int64_t> out = Poisoned<int64_t>({4});
};

template <typename... Extra>
void ExpectSwaRaises(SwaCase& c, const SwaTranslateArgs& args, const std::string& message,
                     Extra&... extra) {
  ByteSnapshot before = c.Snapshot();
  (before.Add(extra.data(), extra.bytes()), ...);
  ExpectRaisesUnchanged([&] { SwaTranslate(args); }, before, message);
}

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

TEST(SwaTranslateValidation, PresenceLutMissingRaises) {
  SwaCase c;
  SwaTranslateArgs args = c.Args();
  args.full_to_swa_index_mapping = TensorView();
  ExpectSwaRaises(c, args, "kv-canary: full_to_swa_index_mapping is required, got None");
}

TEST(SwaTranslateValidation, G1SlotIndicesNotContiguousRaises) {
  SwaCase c;
  const HostTensor<int64_t> wide({8});
  SwaTranslateArgs args = c.Args();
  args.slot_indices = EveryOther(wide);
  ExpectSwaRaises(c, args, "kv-canary: slot_indices must be contiguous");
}

TEST(SwaTranslateValidation, G1OutNotContiguousRaises) {
  SwaCase c;
  HostTensor<int64_t> wide = Poisoned<int64_t>({8});
  SwaTranslateArgs args = c.Args();
  args.out_slot_indices = EveryOther(wide);
  ExpectSwaRaises(c, args, "kv-canary: out_slot_indices must be contiguous", wide);
}

TEST(SwaTranslateValidation, G2SlotIndicesWrongDtypeRaises) {
  SwaCase c;
  const HostTensor<int32_t> narrow = HostTensor<int32_t>::Of({-1, 0, 3, 100});
  SwaTranslateArgs args = c.Args();
  args.slot_indices = narrow.view();
  ExpectSwaRaises(c, args, "kv-canary: slot_indices must have dtype torch.int64, got torch.int32");
}

TEST(SwaTranslateValidation, G2LutWrongDtypeRaises) {
  SwaCase c;
  const HostTensor<int32_t> narrow({8});
  SwaTranslateArgs args = c.Args();
  args.full_to_swa_index_mapping = narrow.view();
  ExpectSwaRaises(c, args,
                  "kv-canary: full_to_swa_index_mapping must have dtype torch.int64, got "
                  "torch.int32");
}

TEST(SwaTranslateValidation, G3SlotIndicesNot1DRaises) {
  SwaCase c;
  SwaTranslateArgs args = c.Args();
  args.slot_indices = c.slot_indices.view({2, 2});
  ExpectSwaRaises(c, args, "kv-canary: slot_indices must be 1-D, got shape (2, 2)");
}

TEST(SwaTranslateValidation, G3OutNot1DRaises) {
  SwaCase c;
  SwaTranslateArgs args = c.Args();
  args.out_slot_indices = c.out.view({4, 1});
  ExpectSwaRaises(c, args, "kv-canary: out_slot_indices must be 1-D, got shape (4, 1)");
}

TEST(SwaTranslateValidation, G5OutLengthRaises) {
  SwaCase c;
  SwaTranslateArgs args = c.Args();
  args.out_slot_indices = c.out.view({3});
  ExpectSwaRaises(c, args, "kv-canary: out_slot_indices length must be 4, got 3");
}

TEST(SwaTranslateValidation, G6EmptyLutRaises) {
  SwaCase c;
  SwaTranslateArgs args = c.Args();
  args.full_to_swa_index_mapping = c.lut.view({0});
  ExpectSwaRaises(c, args, "kv-canary: full_to_swa_index_mapping length must be >= 1, got 0");
}

TEST(SwaTranslateValidation, G7SlotIndicesOnOtherDeviceRaises) {
  SwaCase c;
  SwaTranslateArgs args = c.Args();
  args.slot_indices = OnCuda(args.slot_indices);
  ExpectSwaRaises(c, args,
                  "kv-canary: slot_indices must be on out_slot_indices's device cpu, got cuda:0");
}

TEST(SwaTranslateValidation, G7LutOnOtherDeviceRaises) {
  SwaCase c;
  SwaTranslateArgs args = c.Args();
  args.full_to_swa_index_mapping = OnCuda(args.full_to_swa_index_mapping);
  ExpectSwaRaises(c, args,
                  "kv-canary: full_to_swa_index_mapping must be on out_slot_indices's device cpu, "
                  "got cuda:0");
}

TEST(SwaTranslateValidation, G8OutReadOnlyRaises) {
  SwaCase c;
  SwaTranslateArgs args = c.Args();
  args.out_slot_indices = c.out.read_only_view();
  ExpectSwaRaises(c, args, "kv-canary: out_slot_indices must be writable");
}

void AllOnDevice(Device device, SwaTranslateArgs& args) {
  MoveToDevice(device,
               {&args.slot_indices, &args.full_to_swa_index_mapping, &args.out_slot_indices});
}

TEST(SwaTranslateValidation, G9AllOnUnsupportedDeviceRaises) {
  SwaCase c;
  SwaTranslateArgs args = c.Args();
  AllOnDevice(UnsupportedDevice(), args);
  ExpectSwaRaises(c, args,
                  "kv-canary: out_slot_indices is on unsupported device dlpack_device_8:0");
}

#if !defined(KVC_HAVE_CUDA)
TEST(SwaTranslateValidation, G9AllOnCudaWithoutBackendRaises) {
  SwaCase c;
  SwaTranslateArgs args = c.Args();
  AllOnDevice(Device::CUDA(0), args);
  ExpectSwaRaises(c, args, "kv-canary: out_slot_indices is on unsupported device cuda:0");
}
#endif
}  // namespace
}  // namespace kvcanary::testing
