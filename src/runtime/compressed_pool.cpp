// The install refusals of a compressed pool description (GroupSpec::compress_ratio and
// full_to_compressed).
#include "runtime/compressed_pool.h"

#include <sstream>
#include <string>

#include "kvcanary/checked.h"
#include "kvcanary/error.h"

namespace kvcanary::runtime {
namespace {

std::string Describe(const TensorView& table) {
  std::ostringstream out;
  out << DTypeName(table.dtype()) << " [";
  for (int d = 0; d < table.ndim(); ++d) out << (d ? ", " : "") << table.size(d);
  out << "] on " << table.device().ToString();
  return out.str();
}

// The table is int64 [pool_slot_count + 1], contiguous, on the install's device.
void CheckTable(const GroupSpec& spec, const InstallArgs& args, const std::string& group) {
  const TensorView& table = spec.full_to_compressed;
  if (!table.defined()) {
    ThrowError("kv-canary: ", group,
               " full_to_compressed must map the full pool's slots with compress_ratio ",
               spec.compress_ratio, ", got none");
  }
  const int64_t length = CheckedAdd("pool_slot_count + 1", args.pool_slot_count, 1);
  if (table.dtype() != DType::kInt64 || table.ndim() != 1 || table.length() != length ||
      !table.is_contiguous() || !(table.device() == args.device)) {
    ThrowError("kv-canary: ", group,
               " full_to_compressed must be a contiguous ", DTypeName(DType::kInt64),
               " [pool_slot_count + 1 = ", length, "] on ", args.device.ToString(), ", got ",
               Describe(table));
  }
}

}  // namespace

void CheckCompressedPool(const GroupSpec& spec, const InstallArgs& args, const Config& config) {
  const std::string group = std::string("group ") + GroupKindName(spec.kind);
  if (spec.compress_ratio < 1) {
    ThrowError("kv-canary: ", group, " compress_ratio must be at least 1, got ",
               spec.compress_ratio);
  }
  if (!IsCompressed(spec)) {
    if (spec.full_to_compressed.defined()) {
      ThrowError("kv-canary: ", group,
                 " full_to_compressed must be absent unless compress_ratio > 1, got a table with "
                 "compress_ratio 1");
    }
    return;
  }
  if (spec.kind != GroupKind::kFull) {
    ThrowError("kv-canary: ", group,
               " compress_ratio must be 1 (a compressed pool is the FULL group), got ",
               spec.compress_ratio);
  }
  CheckTable(spec, args, group);
  const int64_t needed = args.pool_slot_count / spec.compress_ratio + 1;
  if (spec.num_slots < needed) {
    ThrowError("kv-canary: ", group, " num_slots must be at least pool_slot_count / compress_ratio",
               " + 1 = ", needed, " (a compressed slot per ", spec.compress_ratio,
               " full slots, and the padding slot), got ", spec.num_slots);
  }
  if (config.swa_divergence_stats_interval > 0) {
    ThrowError("kv-canary: swa_divergence_stats_interval must be 0 with a compressed ", group,
               " (its records are not at full slots), got ", config.swa_divergence_stats_interval);
  }
}

}  // namespace kvcanary::runtime
