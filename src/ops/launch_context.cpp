#include "ops/launch_context.h"

#include <string>

#include "kvcanary/error.h"
#include "ops/check.h"

namespace kvcanary {
namespace {

std::string SourceName(int i) { return "real_kv_sources[" + std::to_string(i) + "].tensor"; }

}  // namespace

sig::TensorSpec CanaryBufSpec(const LaunchContext& context, bool written) {
  sig::TensorSpec spec = sig::In(context.canary_buf, "canary_buf", DType::kUInt8, 2);
  spec.output = written;
  return spec;
}

sig::SpecList RingSpecs(const LaunchContext& context) {
  sig::TensorSpec ring = sig::Out(context.violation_ring, "violation_ring", DType::kInt64, 2);
  ring.columns = sig::Exactly(kViolationFields);
  return {ring,
          sig::Out(context.violation_write_index, "violation_write_index", DType::kInt32, 1,
                   sig::Exactly(1)),
          sig::Out(context.slot_run_counter, "slot_run_counter", DType::kInt64, 1, sig::Exactly(1)),
          sig::Out(context.kernel_run_counter, "kernel_run_counter", DType::kInt64, 1,
                   sig::Exactly(1))};
}

void CheckSourceCountLimit(const LaunchContext& context) {
  if (context.num_real_kv_sources > kMaxRealKvSources) {
    ThrowError("kv-canary: at most ", kMaxRealKvSources,
               " RealKvSource entries supported by the CUDA ABI, got ",
               context.num_real_kv_sources);
  }
}

void CheckSourceLayouts(const LaunchContext& context) {
  for (int i = 0; i < context.num_real_kv_sources; ++i) {
    const TensorView& tensor = context.real_kv_sources[i].tensor;
    const std::string name = SourceName(i);
    check::Present(tensor, name);
    check::Contiguous(tensor, name);
    if (tensor.ndim() != 2) {
      ThrowError("kv-canary: ", name, " (viewed as uint8) must be 2-D, got ", tensor.ndim(), "-D");
    }
    ValidateRealKvSource(context.real_kv_sources[i]);
  }
}

void CheckCanaryBufWidth(const LaunchContext& context, std::string_view op_label) {
  if (context.canary_buf.size(1) < kCanarySlotBytes) {
    ThrowError("kv-canary: ", op_label, ": slot_stride_bytes must hold at least ", kCanarySlotBytes,
               " bytes per slot, got ", context.canary_buf.size(1));
  }
}

void CheckSourceCountAndMode(const LaunchContext& context, std::string_view op_label) {
  if (context.num_real_kv_sources < 0 || context.num_real_kv_sources > kMaxRealKvSources) {
    ThrowError("kv-canary: ", op_label, ": num_sources must be in [0, ", kMaxRealKvSources,
               "], got ", context.num_real_kv_sources);
  }
  const int32_t mode = context.real_kv_hash_mode;
  if (mode < 0 || mode > 2) {
    ThrowError("kv-canary: real_kv_hash_mode must be one of 0/1/2, got ", mode);
  }
}

void CheckSourceDevices(const LaunchContext& context) {
  for (int i = 0; i < context.num_real_kv_sources; ++i) {
    const std::string table = "real_kv_sources[" + std::to_string(i) + "].layer_addresses";
    check::SameDevice(context.canary_buf, "canary_buf",
                      {{&context.real_kv_sources[i].tensor, SourceName(i)},
                       {&context.real_kv_sources[i].layer_addresses, table}});
  }
}

void CheckPairIsDistinct(const LaunchContext& context, const LaunchContext& paired) {
  if (paired.canary_buf.data() == context.canary_buf.data()) {
    ThrowError("kv-canary: paired_context.canary_buf must be a different buffer from canary_buf");
  }
}

LaunchParams LaunchParamsOf(const LaunchContext& context) {
  LaunchParams launch;
  launch.canary = context.canary_buf.data_as<uint8_t>();
  launch.num_slots = context.canary_buf.size(0);
  launch.slot_stride_bytes = context.canary_buf.size(1);  // contiguous rows
  launch.kernel_kind = context.kernel_kind;
  launch.ring = context.violation_ring.data_as<int64_t>();
  launch.ring_capacity = context.violation_ring.size(0);
  launch.write_index = context.violation_write_index.data_as<int32_t>();
  launch.slot_run_counter = context.slot_run_counter.data_as<int64_t>();
  launch.kernel_run_counter = context.kernel_run_counter.data_as<int64_t>();
  const auto mode = static_cast<RealKvHashMode>(context.real_kv_hash_mode);
  if (mode == RealKvHashMode::kNone) return launch;
  launch.real_kv.num_sources = context.num_real_kv_sources;
  for (int i = 0; i < context.num_real_kv_sources; ++i) {
    const RealKvSource& source = context.real_kv_sources[i];
    const int64_t itemsize = ItemSize(source.tensor.dtype());
    launch.real_kv.sources[i] = RealKvSourceParams{
        source.tensor.data_as<const uint8_t>(),
        source.tensor.size(0),
        source.tensor.stride(0) * itemsize,
        source.page_size,
        source.num_bytes_per_token,
        mode == RealKvHashMode::kPartial ? kRealKvBlockBytes : source.read_bytes,
        source.layer_addresses.defined() ? source.layer_addresses.data_as<const int64_t>()
                                         : nullptr,
        NumLayers(source)};
  }
  return launch;
}

}  // namespace kvcanary
