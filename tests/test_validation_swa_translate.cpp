// Validation of launch_swa_translate_kernel: out[i] = tr(in[i]); int64 1-D contiguous, equal
// lengths, one device.
//
// Each row starts from a valid call, breaks exactly one thing, and checks the exact message and
// that no output byte changed. Outputs start filled with 0x5A bytes, so "unchanged" is not the
// same as "still zero", and each valid baseline is shown to write.
#include <gtest/gtest.h>

#include <cstdint>
#include <iterator>
#include <vector>

#include "kvcanary/kvcanary.h"
#include "reject_rows.h"
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

// The output may not overlap an input (in place, the same view, is allowed).
const Row kOverlapRows[] = {
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
};

using Args = SwaTranslateArgs;
constexpr DType i32 = DType::kInt32, i64 = DType::kInt64;
const auto kSlots = KVC_ARG(slot_indices, "SlotIndices");
const auto kLut = KVC_ARG(full_to_swa_index_mapping, "Lut");
const auto kOut = KVC_ARG(out_slot_indices, "Out");

// Presence, G1-G3 contiguity, dtype and rank, G5 and G6 lengths, G7 one device (the reference
// being out_slot_indices), G8 writability.
const std::vector<Row> kTensorRows = {
    MissingRow<SwaCase>("PresenceLutMissing", kLut),
    NotContiguousRow<SwaCase>("G1", kSlots),
    NotContiguousRow<SwaCase>("G1", kOut),
    WrongDtypeRow<SwaCase>("G2", kSlots, i64, i32),
    WrongDtypeRow<SwaCase>("G2", kLut, i64, i32),
    RankRow<SwaCase>("G3", kSlots, 1, {2, 2}),
    RankRow<SwaCase>("G3", kOut, 1, {4, 1}),
    LengthRow<SwaCase>("G5", kOut, 4, 3),
    ReplaceRow<SwaCase>("G6EmptyLut", kLut, Resized<SwaCase>(0),
                        "kv-canary: full_to_swa_index_mapping length must be >= 1, got 0"),
    OtherDeviceRow<SwaCase>("G7", kSlots, "out_slot_indices"),
    OtherDeviceRow<SwaCase>("G7", kLut, "out_slot_indices"),
    ReadOnlyRow<SwaCase>("G8", kOut),
};

const std::vector<Row> kRows =
    Concat(std::vector<Row>(std::begin(kOverlapRows), std::end(kOverlapRows)), kTensorRows,
           UnsupportedDeviceRows<SwaCase>("", "out_slot_indices", AllOnDevice));

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
