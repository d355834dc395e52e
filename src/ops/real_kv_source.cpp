// RealKvSource construction (rows R1-R7 of the validation table) and the two host-side hash
// helpers of the Python API (real_kv_hash, compute_slot_hash).
#include <cstdint>

#include "core/real_kv.h"
#include "core/record.h"
#include "kvcanary/checked.h"
#include "kvcanary/context.h"
#include "kvcanary/error.h"
#include "ops/check.h"
#include "ops/launch_context.h"
#include "ops/signature.h"

namespace kvcanary {

namespace {

// R1-R3: the three scalars, before the tensor is looked at.
void CheckSourceScalars(const RealKvSource& source) {
  const int64_t nb = source.num_bytes_per_token;
  if (source.page_size < 1) {
    ThrowError("kv-canary: RealKvSource.page_size must be >= 1, got ", source.page_size);
  }
  if (nb <= 0 || nb % kRealKvBlockBytes != 0) {
    ThrowError(
        "kv-canary: RealKvSource.num_bytes_per_token must be a positive multiple of 16, got ", nb);
  }
  if (source.read_bytes <= 0 || source.read_bytes > nb ||
      source.read_bytes % kRealKvBlockBytes != 0) {
    ThrowError(
        "kv-canary: RealKvSource.read_bytes must be a positive multiple of 16 in "
        "(0, num_bytes_per_token=",
        nb, "], got ", source.read_bytes);
  }
}

// R4-R7: the tensor's rank, row stride, row width against the slot layout, alignment.
void CheckSourceTensor(const RealKvSource& source) {
  const TensorView& t = source.tensor;
  const int64_t nb = source.num_bytes_per_token;
  if (t.ndim() < 2) {
    ThrowError("kv-canary: RealKvSource.tensor must be at least 2-D, got shape ", t.ShapeString());
  }
  const int64_t itemsize = ItemSize(t.dtype());
  const int64_t row_stride_bytes =
      CheckedMul("RealKvSource.tensor row stride bytes", t.stride(0), itemsize);
  if (row_stride_bytes % kRealKvBlockBytes != 0) {
    ThrowError("kv-canary: RealKvSource.tensor row stride must be a multiple of 16 bytes, got ",
               row_stride_bytes, " bytes (shape=", t.ShapeString(), ", strides=", t.StridesString(),
               ", dtype=", DTypeName(t.dtype()), ")");
  }
  // Both products come from the caller: wrapped, a small page_size x num_bytes_per_token would
  // pass the width check below and the kernels would read past each row.
  const int64_t dim1_bytes = CheckedMul("RealKvSource.tensor dim-1 bytes", t.size(1), itemsize);
  const int64_t page_bytes =
      CheckedMul("RealKvSource page_size x num_bytes_per_token", source.page_size, nb);
  if (dim1_bytes < page_bytes) {
    ThrowError("kv-canary: RealKvSource row is too narrow for its slot layout: dim-1 is ",
               dim1_bytes, " bytes but page_size=", source.page_size, " x num_bytes_per_token=", nb,
               " needs ", page_bytes);
  }
  const auto address = reinterpret_cast<uintptr_t>(t.data());
  if (address % kRealKvBlockBytes != 0) {
    ThrowError("kv-canary: RealKvSource.tensor data pointer must be 16-byte aligned, got 0x",
               std::hex, address);
  }
}

// R8 (a kvcanary addition): the layer table's dtype, rank, layout, length bounds, device, a data
// pointer, and the bytes one slot reads across the layers.
void CheckSourceLayers(const RealKvSource& source) {
  const TensorView& table = source.layer_addresses;
  if (!table.defined()) return;
  constexpr std::string_view kName = "RealKvSource.layer_addresses";
  check::HasDType(table, DType::kInt64, kName);
  check::Is1D(table, kName);
  check::Contiguous(table, kName);
  if (table.size(0) < 1 || table.size(0) > kMaxRealKvLayers) {
    ThrowError("kv-canary: ", kName, " length must be in [1, ", kMaxRealKvLayers, "], got ",
               table.size(0));
  }
  if (table.data() == nullptr) {
    ThrowError("kv-canary: ", kName, " must not be a null pointer, got length ", table.size(0));
  }
  check::SameDevice(source.tensor, "RealKvSource.tensor", {{&table, kName}});
  CheckedMul("RealKvSource layers x read_bytes per slot", table.size(0), source.read_bytes);
}

}  // namespace

int64_t NumLayers(const RealKvSource& source) {
  return source.layer_addresses.defined() ? source.layer_addresses.size(0) : 1;
}

void ValidateRealKvSource(const RealKvSource& source) {
  check::Present(source.tensor, "RealKvSource.tensor");
  // No op's table holds a source: its sizes, span and alignment are checked here, before any
  // arithmetic on them (a row past int64 bytes would wrap into a wild read).
  sig::CheckViewBounds(source.tensor, "RealKvSource.tensor");
  if (source.layer_addresses.defined()) {
    sig::CheckViewBounds(source.layer_addresses, "RealKvSource.layer_addresses");
  }
  CheckSourceScalars(source);
  CheckSourceTensor(source);
  CheckSourceLayers(source);
}

RealKvSource MakeRealKvSource(const TensorView& tensor, int64_t page_size,
                              int64_t num_bytes_per_token, int64_t read_bytes) {
  RealKvSource source{tensor, page_size, num_bytes_per_token, read_bytes, TensorView()};
  ValidateRealKvSource(source);
  return source;
}

uint64_t RealKvHash(const RealKvSource* sources, int num_sources, int32_t real_kv_hash_mode,
                    int64_t slot) {
  LaunchContext context;
  context.num_real_kv_sources = num_sources;
  context.real_kv_hash_mode = real_kv_hash_mode;
  CheckSourceCountLimit(context);
  CheckSourceCountAndMode(context, "real_kv_hash");
  for (int i = 0; i < num_sources; ++i) context.real_kv_sources[i] = sources[i];
  CheckSourceLayouts(context);
  for (int i = 0; i < num_sources; ++i) {
    if (sources[i].tensor.device().type != DeviceType::kCPU) {
      ThrowError("kv-canary: real_kv_hash reads CPU tensors only, got real_kv_sources[", i,
                 "].tensor on ", sources[i].tensor.device().ToString());
    }  // a layer table is on the tensor's device (R8)
  }
  if (slot < 0) ThrowError("kv-canary: real_kv_hash slot_idx must be >= 0, got ", slot);
  return RealKvFingerprint(LaunchParamsOf(context).real_kv, slot);
}

uint64_t ComputeSlotHash(const TensorView& canary_buf, int64_t slot) {
  LaunchContext context;
  context.canary_buf = canary_buf;
  const sig::TensorSpec spec = CanaryBufSpec(context, /*written=*/false);
  sig::CheckPresent({&spec, 1});
  sig::CheckBounds({&spec, 1});
  sig::CheckEach({&spec, 1}, sig::kWhole);
  CheckCanaryBufWidth(context, "compute_slot_hash");
  if (canary_buf.device().type != DeviceType::kCPU) {
    ThrowError("kv-canary: compute_slot_hash reads CPU tensors only, got canary_buf on ",
               canary_buf.device().ToString());
  }
  if (slot < 0) return ChainHeadHash();
  if (slot >= canary_buf.size(0)) {
    ThrowError("kv-canary: compute_slot_hash slot_idx must be < ", canary_buf.size(0), ", got ",
               slot);
  }
  return RecordHash(LoadRecord(canary_buf.data_as<const uint8_t>() + slot * canary_buf.size(1)));
}

}  // namespace kvcanary
