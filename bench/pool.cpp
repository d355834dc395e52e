// Allocation and filling of the shared bench state.
#include "bench/pool.h"

#include <algorithm>
#include <numeric>
#include <stdexcept>
#include <vector>

#include "bench/parallel.h"

namespace kvcanary::bench {
namespace {

// Host staging for uploads: big enough to amortise a copy, small enough to stay in cache.
constexpr int64_t kChunkBytes = int64_t{1} << 20;

int TagIndex(CanaryLaunchTag tag) {
  const int index = static_cast<int>(tag);
  if (index < 0 || index > 3) throw std::logic_error("bench Pool: not a FULL HEAD/TAIL tag");
  return index;
}

bool IsTail(CanaryLaunchTag tag) {
  return tag == CanaryLaunchTag::kTailKFull || tag == CanaryLaunchTag::kTailVFull;
}

// Pages of `rows_per_page` rows are cut from a fresh random permutation of [1, num_slots):
// every row (and every page) holds distinct slots, and filling costs one shuffle per page.
void FillReqToToken(const DeviceTensor& table, int64_t rows, int64_t cols, int64_t num_slots,
                    uint64_t seed) {
  const int64_t slots = num_slots - 1;  // slot 0 is the padding slot
  const int64_t rows_per_page = slots / cols;
  if (rows_per_page < 1) throw std::invalid_argument("req_to_token is wider than the pool");
  const int64_t pages = (rows + rows_per_page - 1) / rows_per_page;
  ParallelChunks(pages, [&](int thread, int64_t begin, int64_t end) {
    std::vector<int32_t> permutation(slots);
    std::iota(permutation.begin(), permutation.end(), 1);
    Rng rng(seed + 0x1000 * (thread + 1));
    for (int64_t page = begin; page < end; ++page) {
      Shuffle(permutation, rng);
      const int64_t first_row = page * rows_per_page;
      const int64_t page_rows = std::min(rows_per_page, rows - first_row);
      table.Upload(permutation.data(), page_rows * cols, first_row * cols);
    }
  });
}

void FillRandom(const DeviceTensor& tensor, uint64_t seed) {
  const int64_t words = tensor.bytes() / 8;
  const int64_t chunk_words = kChunkBytes / 8;
  const int64_t chunks = (words + chunk_words - 1) / chunk_words;
  ParallelChunks(chunks, [&](int thread, int64_t begin, int64_t end) {
    Rng rng(seed + 0x2000 * (thread + 1));
    std::vector<uint64_t> staging(chunk_words);
    for (int64_t chunk = begin; chunk < end; ++chunk) {
      const int64_t first = chunk * chunk_words;
      const int64_t count = std::min(chunk_words, words - first);
      for (int64_t i = 0; i < count; ++i) staging[i] = rng.Next();
      tensor.device().CopyToDevice(static_cast<uint64_t*>(tensor.data()) + first, staging.data(),
                                   count * 8);
    }
  });
}

}  // namespace

void ZeroFill(const DeviceTensor& tensor) {
  const std::vector<uint8_t> zeros(std::min(kChunkBytes, tensor.bytes()), 0);
  const int64_t chunks = (tensor.bytes() + kChunkBytes - 1) / kChunkBytes;
  ParallelChunks(chunks, [&](int, int64_t begin, int64_t end) {
    for (int64_t chunk = begin; chunk < end; ++chunk) {
      const int64_t first = chunk * kChunkBytes;
      tensor.device().CopyToDevice(static_cast<uint8_t*>(tensor.data()) + first, zeros.data(),
                                   std::min(kChunkBytes, tensor.bytes() - first));
    }
  });
}

Pool::Pool(BenchDevice& device, const Suite& suite, uint64_t seed)
    : device_(&device), suite_(suite) {
  const int64_t n = suite.num_slots;
  req_to_token_ =
      DeviceTensor(device, DType::kInt32, {suite.req_to_token_rows, suite.req_to_token_cols});
  FillReqToToken(req_to_token_, suite.req_to_token_rows, suite.req_to_token_cols, n, seed);
  block_table_ = DeviceTensor(device, DType::kInt32, {suite.req_to_token_rows, block_table_cols()});
  ZeroFill(block_table_);
  for (DeviceTensor& buffer : canary_) {
    buffer = DeviceTensor(device, DType::kUInt8, {n, kCanarySlotBytes});
    ZeroFill(buffer);
  }
  for (size_t half = 0; half < kv_.size(); ++half) {
    kv_[half] = DeviceTensor(device, DType::kBFloat16, {n, suite.real_kv_bytes_per_token / 2});
    FillRandom(kv_[half], seed + 7 * (half + 1));
    if (suite.fingerprint_layers <= 1) continue;
    std::vector<int64_t> addresses = {reinterpret_cast<int64_t>(kv_[half].data())};
    for (int64_t layer = 1; layer < suite.fingerprint_layers; ++layer) {
      const DeviceTensor& deep = deep_kv_[half].emplace_back(
          device, DType::kBFloat16, std::vector<int64_t>{n, suite.real_kv_bytes_per_token / 2});
      FillRandom(deep, seed + 7 * (half + 1) + 1000 * static_cast<uint64_t>(layer));
      addresses.push_back(reinterpret_cast<int64_t>(deep.data()));
    }
    layer_tables_[half] = DeviceTensor(device, DType::kInt64, {suite.fingerprint_layers});
    layer_tables_[half].Upload(addresses);
  }
  ring_ = DeviceTensor(device, DType::kInt64, {suite.ring_capacity, kViolationFields});
  write_index_ = DeviceTensor(device, DType::kInt32, {1});
  slot_run_counters_ = DeviceTensor(device, DType::kInt64, {kNumLaunchTags});
  kernel_run_counters_ = DeviceTensor(device, DType::kInt64, {kNumLaunchTags});
  chain_assert_ = DeviceTensor(device, DType::kInt32, {1});
  for (const DeviceTensor* t :
       {&ring_, &write_index_, &slot_run_counters_, &kernel_run_counters_, &chain_assert_}) {
    ZeroFill(*t);
  }
}

const DeviceTensor& Pool::canary(CanaryLaunchTag tag) const { return canary_[TagIndex(tag)]; }

int Pool::FoldedLayers(CanaryLaunchTag tag, RealData mode) const {
  return IsTail(tag) && mode == RealData::kPartial ? static_cast<int>(suite_.fingerprint_layers)
                                                   : 0;
}

LaunchContext Pool::Context(CanaryLaunchTag tag, RealData mode) const {
  const int index = TagIndex(tag);
  LaunchContext context;
  context.canary_buf = canary_[index].view();
  context.kernel_kind = static_cast<int64_t>(tag);
  context.violation_ring = ring_.view();
  context.violation_write_index = write_index_.view();
  context.slot_run_counter = slot_run_counters_.element(index);
  context.kernel_run_counter = kernel_run_counters_.element(index);
  context.enable_chain_position_assert = chain_assert_.view();
  if (FoldedLayers(tag, mode) > 0) {
    const int half = tag == CanaryLaunchTag::kTailKFull ? 0 : 1;
    const int64_t bytes = suite_.real_kv_bytes_per_token;
    context.real_kv_sources[0] =
        MakeRealKvSource(kv_[half].view(), /*page_size=*/1, bytes, bytes);
    if (suite_.fingerprint_layers > 1) {
      context.real_kv_sources[0].layer_addresses = layer_tables_[half].view();
    }
    context.num_real_kv_sources = 1;
    context.real_kv_hash_mode = static_cast<int32_t>(RealKvHashMode::kPartial);
  }
  return context;
}

int32_t Pool::ViolationCount() const { return write_index_.Read<int32_t>(0); }

std::array<int64_t, kViolationFields> Pool::FirstViolation() const {
  const std::vector<int64_t> row = ring_.Download<int64_t>(0, kViolationFields);
  std::array<int64_t, kViolationFields> out{};
  std::copy(row.begin(), row.end(), out.begin());
  return out;
}

void Pool::ResetViolations() {
  ZeroFill(ring_);
  ZeroFill(write_index_);
}

int64_t Pool::SlotRunCount(CanaryLaunchTag tag) const {
  return slot_run_counters_.Read<int64_t>(TagIndex(tag));
}

int64_t Pool::KernelRunCount(CanaryLaunchTag tag) const {
  return kernel_run_counters_.Read<int64_t>(TagIndex(tag));
}

}  // namespace kvcanary::bench
