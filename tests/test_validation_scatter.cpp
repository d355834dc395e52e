// Validation of Scatter (spec/kernels.md §11, rows S1-S4 with G7-G9): all ranks, then all dtypes
// (the kType category), then the offsets length, then devices and writability. Each case starts
// from a valid call, breaks one thing, and asserts the exact message, the category and that the
// pool is unchanged.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "kvcanary/scatter.h"
#include "testutil.h"
#include "validation_util.h"

namespace kvcanary::testing {
namespace {

class ScatterValidation : public ::testing::Test {
 protected:
  ScatterValidation()
      : flat_in_(HostTensor<int64_t>::Of({1, 2, 3, 4, 5})),
        offsets_(HostTensor<int64_t>::Of({0, 2, 5})),
        req_pool_indices_(HostTensor<int64_t>::Of({1, 2})),
        pool_({3, 4}, -7) {
    args_ = ScatterArgs{flat_in_.view(), offsets_.view(), req_pool_indices_.view(), pool_.view()};
  }

  // Asserts that Scatter raises exactly `message` in `category` and leaves the pool as it was.
  void ExpectRejected(const std::string& message,
                      Error::Category category = Error::Category::kValue) {
    ByteSnapshot pool(pool_);
    try {
      Scatter(args_);
      ADD_FAILURE() << "expected kvcanary::Error: " << message;
    } catch (const Error& error) {
      EXPECT_EQ(std::string(error.what()), message);
      EXPECT_EQ(error.category(), category) << message;
    }
    EXPECT_TRUE(pool.Unchanged());
  }
  void ExpectTypeError(const std::string& message) {
    ExpectRejected(message, Error::Category::kType);
  }

  HostTensor<int64_t> flat_in_, offsets_, req_pool_indices_;
  HostTensor<int32_t> pool_;
  ScatterArgs args_;
};

TEST_F(ScatterValidation, ValidBaselineFillsThePool) {
  Scatter(args_);
  const std::vector<int32_t> pool(pool_.values().begin(), pool_.values().end());
  EXPECT_EQ(pool, (std::vector<int32_t>{-7, -7, -7, -7, 1, 2, -7, -7, 3, 4, 5, -7}));
}

TEST_F(ScatterValidation, AbsentOffsetsRaise) {
  args_.offsets = TensorView();
  ExpectRejected("kv-canary: offsets is required, got None");
}

// --- S1: ranks ---

TEST_F(ScatterValidation, S1FlatInNot1DRaises) {
  args_.flat_in = flat_in_.view({5, 1});
  ExpectRejected("kv-canary: scatter_req_token_ids flat_in must be 1-D, got shape (5, 1)");
}

TEST_F(ScatterValidation, S1OffsetsNot1DRaises) {
  args_.offsets = offsets_.view({});
  ExpectRejected("kv-canary: scatter_req_token_ids offsets must be 1-D, got shape ()");
}

TEST_F(ScatterValidation, S1ReqPoolIndicesNot1DRaises) {
  args_.req_pool_indices = req_pool_indices_.view({1, 2});
  ExpectRejected("kv-canary: scatter_req_token_ids req_pool_indices must be 1-D, got shape (1, 2)");
}

TEST_F(ScatterValidation, S1PoolOutNot2DRaises) {
  args_.pool_out = pool_.view({12});
  ExpectRejected("kv-canary: scatter_req_token_ids pool_out must be 2-D, got shape (12,)");
}

TEST_F(ScatterValidation, S1RanksAreCheckedBeforeDTypes) {
  args_.flat_in = Recast(flat_in_, DType::kInt32);
  args_.pool_out = pool_.view({12});
  ExpectRejected("kv-canary: scatter_req_token_ids pool_out must be 2-D, got shape (12,)");
}

// --- S2: dtypes, raised as TypeError ---

TEST_F(ScatterValidation, S2FlatInNotInt64IsATypeError) {
  args_.flat_in = Recast(flat_in_, DType::kInt32);
  ExpectTypeError("kv-canary: scatter_req_token_ids flat_in must be int64, got torch.int32");
}

TEST_F(ScatterValidation, S2OffsetsNotInt64IsATypeError) {
  args_.offsets = Recast(offsets_, DType::kFloat64);
  ExpectTypeError("kv-canary: scatter_req_token_ids offsets must be int64, got torch.float64");
}

TEST_F(ScatterValidation, S2ReqPoolIndicesNotInt64IsATypeError) {
  args_.req_pool_indices = Recast(req_pool_indices_, DType::kUInt64);
  ExpectTypeError(
      "kv-canary: scatter_req_token_ids req_pool_indices must be int64, got torch.uint64");
}

TEST_F(ScatterValidation, S2PoolOutNotInt32IsATypeError) {
  args_.pool_out = Recast(pool_, DType::kFloat32);
  ExpectTypeError("kv-canary: scatter_req_token_ids pool_out must be int32, got torch.float32");
}

TEST_F(ScatterValidation, S2DTypesAreCheckedBeforeTheOffsetsLength) {
  args_.offsets = offsets_.view({2});
  args_.pool_out = Recast(pool_, DType::kInt64);
  ExpectTypeError("kv-canary: scatter_req_token_ids pool_out must be int32, got torch.int64");
}

// --- S3: offsets length ---

TEST_F(ScatterValidation, S3OffsetsNotBsPlusOneRaises) {
  args_.offsets = offsets_.view({2});
  ExpectRejected("kv-canary: scatter_req_token_ids offsets length 2 != bs+1 (3)");
}

// --- S4: one device (pool_out's), pool_out writable; G9 ---

TEST_F(ScatterValidation, S4FlatInOnAnotherDeviceRaises) {
  args_.flat_in = OnCuda(flat_in_);
  ExpectRejected("kv-canary: flat_in must be on pool_out's device cpu, got cuda:0");
}

TEST_F(ScatterValidation, S4ReqPoolIndicesOnAnotherDeviceRaises) {
  args_.req_pool_indices = OnCuda(req_pool_indices_);
  ExpectRejected("kv-canary: req_pool_indices must be on pool_out's device cpu, got cuda:0");
}

TEST_F(ScatterValidation, S4PoolOutOnAnotherDeviceNamesTheInputs) {
  args_.pool_out = OnCuda(pool_);
  ExpectRejected("kv-canary: flat_in must be on pool_out's device cuda:0, got cpu");
}

TEST_F(ScatterValidation, S4ReadOnlyPoolOutRaises) {
  args_.pool_out = pool_.read_only_view();
  ExpectRejected("kv-canary: pool_out must be writable");
}

TEST_F(ScatterValidation, G9DeviceWithoutABackendRaises) {
  const Device metal{DeviceType::kOther, 0, 8};  // kDLMetal
  args_ = ScatterArgs{
      Recast(flat_in_, DType::kInt64, metal), Recast(offsets_, DType::kInt64, metal),
      Recast(req_pool_indices_, DType::kInt64, metal), Recast(pool_, DType::kInt32, metal)};
  ExpectRejected("kv-canary: pool_out is on unsupported device dlpack_device_8:0");
}

#if !defined(KVC_HAVE_CUDA)
TEST_F(ScatterValidation, G9CudaWithoutTheCudaBackendRaises) {
  args_ = ScatterArgs{OnCuda(flat_in_), OnCuda(offsets_), OnCuda(req_pool_indices_), OnCuda(pool_)};
  ExpectRejected("kv-canary: pool_out is on unsupported device cuda:0");
}
#endif

}  // namespace
}  // namespace kvcanary::testing
