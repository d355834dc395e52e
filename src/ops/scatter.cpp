// launch_scatter_req_token_ids_kernel: validation (rows S1-S4 of docs/validation.md) and dispatch.
#include "kvcanary/scatter.h"

#include "cpu/backend.h"
#include "kvcanary/error.h"
#include "ops/check.h"
#include "ops/dispatch.h"
#include "ops/signature.h"

namespace kvcanary {
namespace {

constexpr const char* kPrefix = "kv-canary: scatter_req_token_ids ";

void CheckRank(const TensorView& t, int rank, const char* name) {
  if (t.ndim() != rank) {
    ThrowError(kPrefix, name, " must be ", rank, "-D, got shape ", t.ShapeString());
  }
}

void CheckDType(const TensorView& t, DType dtype, const char* name, const char* dtype_word) {
  if (t.dtype() != dtype)
    ThrowTypeError(kPrefix, name, " must be ", dtype_word, ", got ", DTypeName(t.dtype()));
}

void Validate(const ScatterArgs& a) {
  // The table serves the generic checks only (presence, bounds, device, writable, overlap):
  // scatter's rank and dtype messages are its own, and it honours any strides.
  sig::SpecList table = {sig::In(a.flat_in, "flat_in", DType::kInt64, 0),
                         sig::In(a.offsets, "offsets", DType::kInt64, 0),
                         sig::In(a.req_pool_indices, "req_pool_indices", DType::kInt64, 0),
                         sig::Out(a.pool_out, "pool_out", DType::kInt32, 0)};
  sig::CheckPresent(table);
  sig::CheckBounds(table);
  // S1: ranks; S2: dtypes (TypeError); S3: offsets length.
  CheckRank(a.flat_in, 1, "flat_in");
  CheckRank(a.offsets, 1, "offsets");
  CheckRank(a.req_pool_indices, 1, "req_pool_indices");
  CheckRank(a.pool_out, 2, "pool_out");
  CheckDType(a.flat_in, DType::kInt64, "flat_in", "int64");
  CheckDType(a.offsets, DType::kInt64, "offsets", "int64");
  CheckDType(a.req_pool_indices, DType::kInt64, "req_pool_indices", "int64");
  CheckDType(a.pool_out, DType::kInt32, "pool_out", "int32");
  // bs may be any size >= 0 (a stride-0 view spans 8 bytes whatever its length), so bs + 1 is
  // neither computed nor printed in int64.
  const int64_t bs = a.req_pool_indices.size(0);
  if (a.offsets.size(0) - 1 != bs) {
    ThrowError(kPrefix, "offsets length ", a.offsets.size(0), " != bs+1 (",
               static_cast<uint64_t>(bs) + 1, ")");
  }
  // S4.
  sig::CheckPlacement(a.pool_out, "pool_out", table);
}

}  // namespace

void Scatter(const ScatterArgs& args, StreamHandle stream) {
  Validate(args);
  ScatterParams params;
  params.flat_in = args.flat_in.data_as<const int64_t>();
  params.total = args.flat_in.size(0);
  params.flat_stride = args.flat_in.stride(0);
  params.offsets = args.offsets.data_as<const int64_t>();
  params.offsets_stride = args.offsets.stride(0);
  params.req_pool_indices = args.req_pool_indices.data_as<const int64_t>();
  params.req_pool_indices_stride = args.req_pool_indices.stride(0);
  params.bs = args.req_pool_indices.size(0);
  params.pool = args.pool_out.data_as<int32_t>();
  params.pool_rows = args.pool_out.size(0);
  params.pool_width = args.pool_out.size(1);
  params.pool_stride0 = args.pool_out.stride(0);
  params.pool_stride1 = args.pool_out.stride(1);
  RunOnBackend(
      args.pool_out, "pool_out", "scatter_req_token_ids", [&] { cpu::Scatter(params); },
      [&](auto device) { return cuda::Scatter(params, device, stream); });
}

}  // namespace kvcanary
