// Validation of Scatter: all ranks, then all dtypes (the kType category), then the offsets length,
// then devices and writability. Each row starts from a valid call, breaks one thing, and asserts
// the exact message, the category and that the pool is unchanged.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "kvcanary/scatter.h"
#include "reject_rows.h"
#include "testutil.h"
#include "validation_table.h"
#include "validation_util.h"

namespace kvcanary::testing {
namespace {

// A valid call: two rows of 2 and 3 tokens into pool rows 1 and 2 of a [3, 4] pool.
struct ScatterCase : KeptTensors {
  using OpArgs = ScatterArgs;
  OpArgs Args() const {
    return ScatterArgs{flat_in.view(), offsets.view(), req_pool_indices.view(), pool.view()};
  }
  ByteSnapshot Snapshot() { return ByteSnapshot(pool); }
  static void Run(const ScatterArgs& args) { Scatter(args); }

  HostTensor<int64_t> flat_in = HostTensor<int64_t>::Of({1, 2, 3, 4, 5});
  HostTensor<int64_t> offsets = HostTensor<int64_t>::Of({0, 2, 5});
  HostTensor<int64_t> req_pool_indices = HostTensor<int64_t>::Of({1, 2});
  HostTensor<int32_t> pool = HostTensor<int32_t>({3, 4}, -7);
};

using Row = RejectRow<ScatterCase>;

// A byte that no int64 may start at: the message names its address, so it is fixed memory.
alignas(64) uint8_t misaligned_backing[64];
int64_t* const kMisaligned = reinterpret_cast<int64_t*>(misaligned_backing + 1);

constexpr auto kType = Error::Category::kType;
constexpr const char* kPrefix = "kv-canary: scatter_req_token_ids ";

// S2: `member` (named `arg`) re-typed to `dtype`, raised as TypeError naming the dtype it wants
// (int64, or int32 for pool_out).
Row S2Row(TensorView ScatterArgs::*member, const std::string& arg, const std::string& title,
          DType dtype) {
  const std::string wants = arg == "pool_out" ? "int32" : "int64";
  const std::string message =
      std::string(kPrefix) + arg + " must be " + wants + ", got " + TorchName(dtype);
  Row row = ReplaceRow<ScatterCase>(
      "S2" + title + "NotI" + wants.substr(1), OwnArg(member, arg, title),
      [dtype](ScatterCase&, const TensorView& good) {
        return TensorView(good.data(), dtype, good.device(), ShapeOf(good));
      },
      message);
  row.category = kType;
  return row;
}

const Row kRows[] = {
    {"AbsentOffsets", [](ScatterCase&, ScatterArgs& a) { a.offsets = TensorView(); },
     "kv-canary: offsets is required, got None"},
    // Bounds, before any other check of the tensor: sizes, span, alignment.
    {"BoundsNegativeSize",
     [](ScatterCase& c, ScatterArgs& a) {
       a.flat_in = TensorView(c.flat_in.data(), DType::kInt64, Device::CPU(), {-1}, {1});
     },
     "kv-canary: flat_in must have non-negative sizes, got shape (-1,)"},
    {"BoundsSpanOverflows",
     [](ScatterCase& c, ScatterArgs& a) {
       a.flat_in =
           TensorView(c.flat_in.data(), DType::kInt64, Device::CPU(), {int64_t{1} << 62, 4});
     },
     "kv-canary: flat_in must span at most 2^63 - 1 bytes, got shape (4611686018427387904, 4) "
     "strides (4, 1)"},
    {"BoundsMisalignedData",
     [](ScatterCase&, ScatterArgs& a) {
       a.offsets = TensorView(kMisaligned, DType::kInt64, Device::CPU(), {3});
     },
     "kv-canary: offsets data must be 8-byte aligned for torch.int64, got address 0x" +
         AddressHex(kMisaligned)},
    // An output sharing memory with an input.
    {"OverlapPoolOutOverFlatIn",
     [](ScatterCase& c, ScatterArgs& a) {
       a.pool_out = TensorView(c.flat_in.data(), DType::kInt32, Device::CPU(), {2, 4});
     },
     "kv-canary: pool_out overlaps flat_in in memory; an output needs memory of its own"},
    // S1: ranks.
    {"S1FlatInNot1D",
     [](ScatterCase& c, ScatterArgs& a) {
       a.flat_in = c.flat_in.view({5, 1});
     },
     std::string(kPrefix) + "flat_in must be 1-D, got shape (5, 1)"},
    {"S1OffsetsNot1D", [](ScatterCase& c, ScatterArgs& a) { a.offsets = c.offsets.view({}); },
     std::string(kPrefix) + "offsets must be 1-D, got shape ()"},
    {"S1ReqPoolIndicesNot1D",
     [](ScatterCase& c, ScatterArgs& a) {
       a.req_pool_indices = c.req_pool_indices.view({1, 2});
     },
     std::string(kPrefix) + "req_pool_indices must be 1-D, got shape (1, 2)"},
    {"S1PoolOutNot2D", [](ScatterCase& c, ScatterArgs& a) { a.pool_out = c.pool.view({12}); },
     std::string(kPrefix) + "pool_out must be 2-D, got shape (12,)"},
    {"S1RanksAreCheckedBeforeDTypes",
     [](ScatterCase& c, ScatterArgs& a) {
       a.flat_in = Recast(c.flat_in, DType::kInt32);
       a.pool_out = c.pool.view({12});
     },
     std::string(kPrefix) + "pool_out must be 2-D, got shape (12,)"},
    // S2: dtypes, raised as TypeError.
    S2Row(&ScatterArgs::flat_in, "flat_in", "FlatIn", DType::kInt32),
    S2Row(&ScatterArgs::offsets, "offsets", "Offsets", DType::kFloat64),
    S2Row(&ScatterArgs::req_pool_indices, "req_pool_indices", "ReqPoolIndices", DType::kUInt64),
    S2Row(&ScatterArgs::pool_out, "pool_out", "PoolOut", DType::kFloat32),
    {"S2DTypesAreCheckedBeforeTheOffsetsLength",
     [](ScatterCase& c, ScatterArgs& a) {
       a.offsets = c.offsets.view({2});
       a.pool_out = Recast(c.pool, DType::kInt64);
     },
     std::string(kPrefix) + "pool_out must be int32, got torch.int64", kType},
    // S3: offsets length.
    {"S3OffsetsNotBsPlusOne",
     [](ScatterCase& c, ScatterArgs& a) { a.offsets = c.offsets.view({2}); },
     std::string(kPrefix) + "offsets length 2 != bs+1 (3)"},
    {"S3BsOfAnyLengthHasNoBsPlusOneOverflow",
     [](ScatterCase& c, ScatterArgs& a) {
       // Stride 0: eight bytes of memory make a batch of 2^63 - 1 rows, which passes the bounds.
       a.req_pool_indices =
           TensorView(c.req_pool_indices.data(), DType::kInt64, Device::CPU(), {INT64_MAX}, {0});
     },
     std::string(kPrefix) + "offsets length 3 != bs+1 (9223372036854775808)"},
    // S4: one device (pool_out's), pool_out writable; G9.
    {"S4FlatInOnAnotherDevice",
     [](ScatterCase& c, ScatterArgs& a) { a.flat_in = OnCuda(c.flat_in); },
     "kv-canary: flat_in must be on pool_out's device cpu, got cuda:0"},
    {"S4ReqPoolIndicesOnAnotherDevice",
     [](ScatterCase& c, ScatterArgs& a) { a.req_pool_indices = OnCuda(c.req_pool_indices); },
     "kv-canary: req_pool_indices must be on pool_out's device cpu, got cuda:0"},
    {"S4PoolOutOnAnotherDeviceNamesTheInputs",
     [](ScatterCase& c, ScatterArgs& a) { a.pool_out = OnCuda(c.pool); },
     "kv-canary: flat_in must be on pool_out's device cuda:0, got cpu"},
    {"S4ReadOnlyPoolOut",
     [](ScatterCase& c, ScatterArgs& a) { a.pool_out = c.pool.read_only_view(); },
     "kv-canary: pool_out must be writable"},
    {"G9DeviceWithoutABackend",
     [](ScatterCase& c, ScatterArgs& a) {
       const Device metal = UnsupportedDevice();
       a = ScatterArgs{
           Recast(c.flat_in, DType::kInt64, metal), Recast(c.offsets, DType::kInt64, metal),
           Recast(c.req_pool_indices, DType::kInt64, metal), Recast(c.pool, DType::kInt32, metal)};
     },
     "kv-canary: pool_out is on unsupported device dlpack_device_8:0"},
#if !defined(KVC_HAVE_CUDA)
    {"G9CudaWithoutTheCudaBackend",
     [](ScatterCase& c, ScatterArgs& a) {
       a = ScatterArgs{OnCuda(c.flat_in), OnCuda(c.offsets), OnCuda(c.req_pool_indices),
                       OnCuda(c.pool)};
     },
     "kv-canary: pool_out is on unsupported device cuda:0"},
#endif
};

KVC_REJECTION_TABLE(ScatterRejects, ScatterCase, kRows);

TEST(ScatterValidation, ValidBaselineFillsThePool) {
  ScatterCase c;
  Scatter(c.Args());
  const std::vector<int32_t> pool(c.pool.values().begin(), c.pool.values().end());
  EXPECT_EQ(pool, (std::vector<int32_t>{-7, -7, -7, -7, 1, 2, -7, -7, 3, 4, 5, -7}));
}

}  // namespace
}  // namespace kvcanary::testing
