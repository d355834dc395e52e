// Building and running the launches that store a layout's valid records.
#include "bench/records.h"

#include <cstdint>

namespace kvcanary::bench {

ValidRecordWriter::ValidRecordWriter(const Pool& pool, const CaseLayout& layout) : pool_(&pool) {
  const int64_t prefix = layout.shape().prefix;
  if (prefix == 0) {
    launches_.push_back(MakeLaunch(layout, 0, layout.extend_class_size(), 0));
    return;
  }
  launches_.push_back(MakeLaunch(layout, 0, layout.prefix_class_size(), 0));
  if (layout.extend_class_size() > layout.prefix_class_size()) {
    launches_.push_back(
        MakeLaunch(layout, layout.prefix_class_size(), layout.extend_class_size(), prefix));
  }
}

ValidRecordWriter::Launch ValidRecordWriter::MakeLaunch(const CaseLayout& layout,
                                                        int64_t first_chain, int64_t last_chain,
                                                        int64_t first_position) const {
  BenchDevice& device = pool_->device();
  const int64_t chains = last_chain - first_chain;
  const int64_t length = layout.num_positions() - first_position;
  const int64_t tokens = chains * length;
  std::vector<int64_t> offsets(chains + 1), seeds(chains);
  std::vector<int64_t> input_ids(tokens), positions(tokens), out_cache_loc(tokens);
  for (int64_t r = 0; r < chains; ++r) {
    const int64_t chain = first_chain + r;
    offsets[r] = r * length;
    // A chain that starts past position 0 continues from a prefix slot of the previous position.
    seeds[r] = first_position == 0 ? -1
                                   : layout.ClassSlot(first_position - 1,
                                                      chain % layout.ClassSize(first_position - 1));
    for (int64_t k = 0; k < length; ++k) {
      const int64_t position = first_position + k;
      input_ids[r * length + k] = TokenAt(position);
      positions[r * length + k] = position;
      out_cache_loc[r * length + k] = layout.ClassSlot(position, chain);
    }
  }
  offsets[chains] = tokens;

  Launch launch;
  launch.offsets = DeviceTensor(device, DType::kInt64, {chains + 1});
  launch.seeds = DeviceTensor(device, DType::kInt64, {chains});
  launch.num_valid_reqs = DeviceTensor(device, DType::kInt32, {1});
  launch.input_ids = DeviceTensor(device, DType::kInt64, {tokens});
  launch.positions = DeviceTensor(device, DType::kInt64, {tokens});
  launch.out_cache_loc = DeviceTensor(device, DType::kInt64, {tokens});
  launch.offsets.Upload(offsets);
  launch.seeds.Upload(seeds);
  launch.num_valid_reqs.Upload(std::vector<int32_t>{static_cast<int32_t>(chains)});
  launch.input_ids.Upload(input_ids);
  launch.positions.Upload(positions);
  launch.out_cache_loc.Upload(out_cache_loc);
  return launch;
}

void ValidRecordWriter::Run(CanaryLaunchTag tag, RealData mode) const {
  for (const Launch& launch : launches_) {
    WriteArgs args;
    args.context = pool_->Context(tag, mode);
    args.plan =
        WritePlanView{launch.offsets.view(), launch.seeds.view(), launch.num_valid_reqs.view()};
    args.input_ids = launch.input_ids.view();
    args.positions = launch.positions.view();
    args.out_cache_loc = launch.out_cache_loc.view();
    Write(args, pool_->device().stream());
  }
  pool_->device().Synchronize();
}

}  // namespace kvcanary::bench
