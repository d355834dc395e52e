// A toy inference engine on the CPU with kvcanary's host runtime installed: the four calls around
// every forward, violations read through a listener, then one canary record corrupted on purpose
// and caught. Exit status 0 when the corruption was reported and nothing else was.
//
// The README's runtime snippets are excerpts of this file (between the "[readme ...]" markers).
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <vector>

#include "kvcanary/runtime/canary_manager.h"
#include "kvcanary/version.h"

namespace {

using kvcanary::DType;
using kvcanary::Device;
using kvcanary::TensorView;
using namespace kvcanary::runtime;

constexpr int64_t kSlots = 256;          // KV pool slots; slot 0 is the padding slot
constexpr int64_t kRows = 4;             // req_to_token rows; row 0 is the padding row
constexpr int64_t kContext = 64;         // req_to_token columns: the longest request
constexpr int64_t kBytesPerToken = 16;   // one KV layer's bytes per token
constexpr int64_t kMaxTokens = 64;       // tokens of one forward
constexpr int64_t kPromptTokens = 8;

// The engine's state the canary reads: one KV layer, the req_to_token table, and the batch of
// one forward as six int64 columns (request rows, prefix lengths, extend lengths, token ids,
// positions, slots).
struct ToyEngine {
  std::vector<uint8_t> k = std::vector<uint8_t>(kSlots * kBytesPerToken);
  std::vector<uint8_t> v = std::vector<uint8_t>(kSlots * kBytesPerToken);
  std::vector<int32_t> req_to_token = std::vector<int32_t>(kRows * kContext);
  std::vector<int64_t> columns = std::vector<int64_t>(6 * kMaxTokens);
  std::vector<int64_t> written = std::vector<int64_t>(kRows);  // tokens in the KV cache, per row
  int64_t next_slot = 1;

  static int64_t Token(int64_t row, int64_t position) { return 1000 * row + position; }

  TensorView Column(int index) {
    return TensorView(columns.data() + index * kMaxTokens, DType::kInt64, Device::CPU(),
                      {kMaxTokens});
  }

  InstallArgs MakeInstallArgs() {
    InstallArgs args;
    args.device = Device::CPU();
    args.req_to_token = TensorView(req_to_token.data(), DType::kInt32, args.device,
                                   {kRows, kContext});
    GroupSpec full;
    full.kind = GroupKind::kFull;
    full.num_slots = kSlots;
    full.k_layer0 = TensorView(k.data(), DType::kUInt8, args.device, {kSlots, kBytesPerToken});
    full.v_layer0 = TensorView(v.data(), DType::kUInt8, args.device, {kSlots, kBytesPerToken});
    full.bytes_per_token = kBytesPerToken;
    args.groups = {full};
    args.pool_slot_count = kSlots;
    args.max_prefill_tokens = kMaxTokens;
    return args;
  }

  // Schedules one forward: every request (rows 1..3) prefills its prompt, then decodes a token per
  // step. New slots enter req_to_token; the batch columns describe the forward.
  StepInput Schedule() {
    ForwardHostInput host;
    std::vector<int64_t> ids, positions, slots;
    for (int64_t row = 1; row < kRows; ++row) {
      const int64_t begin = written[row];
      const int64_t end = begin == 0 ? kPromptTokens : begin + 1;
      host.req_pool_indices.push_back(row);
      host.prefix_lens.push_back(begin);
      host.extend_seq_lens.push_back(end - begin);
      for (int64_t position = begin; position < end; ++position) {
        req_to_token[row * kContext + position] = static_cast<int32_t>(next_slot);
        ids.push_back(Token(row, position));
        positions.push_back(position);
        slots.push_back(next_slot++);
      }
      written[row] = end;
    }
    ForwardBatch batch;
    batch.batch_size = static_cast<int64_t>(host.req_pool_indices.size());
    batch.num_tokens = static_cast<int64_t>(ids.size());
    // Column c holds one field of the forward, per row or per token.
    const std::vector<int64_t>* values[] = {&host.req_pool_indices, &host.prefix_lens,
                                            &host.extend_seq_lens, &ids, &positions, &slots};
    TensorView ForwardBatch::*const fields[] = {
        &ForwardBatch::req_pool_indices, &ForwardBatch::prefix_lens, &ForwardBatch::extend_seq_lens,
        &ForwardBatch::input_ids, &ForwardBatch::positions, &ForwardBatch::out_cache_loc};
    for (int c = 0; c < 6; ++c) {
      std::copy(values[c]->begin(), values[c]->end(), columns.begin() + c * kMaxTokens);
      batch.*fields[c] = Column(c);
    }
    StepInput step;
    step.forwards = {batch};
    step.host = {host};
    return step;
  }

  // The model: writes the KV bytes of the forward's new tokens.
  void Forward(const StepInput& step) {
    const int64_t* ids = columns.data() + 3 * kMaxTokens;
    const int64_t* slots = columns.data() + 5 * kMaxTokens;
    for (int64_t t = 0; t < step.forwards[0].num_tokens; ++t) {
      for (int64_t b = 0; b < kBytesPerToken; ++b) {
        k[slots[t] * kBytesPerToken + b] = static_cast<uint8_t>(ids[t] + b);
        v[slots[t] * kBytesPerToken + b] = static_cast<uint8_t>(ids[t] * 3 + b);
      }
    }
  }
};

// Flips the token field of `slot`'s TAIL K record, as a stray write into the canary buffer would.
// The next verify reports it on the record after it in the request: that record's chain hash
// covers this one's token.
void CorruptRecord(const CanaryManager& canary, int64_t slot) {
  const TensorView records = canary.CanaryBuffer(GroupKind::kFull, /*tail=*/true, /*v_half=*/false);
  int64_t* fields = records.data_as<int64_t>() + slot * kvcanary::kCanaryFieldsPerSlot;
  fields[kvcanary::kCanaryFieldToken] ^= 1;
}

}  // namespace

int main() {
  std::printf("kvcanary %s engine loop example\n", kvcanary::kVersionString);
  ToyEngine engine;
  InstallArgs install_args = engine.MakeInstallArgs();

  // [readme install]
  // KVCANARY_MODE unset means mode none: Install then builds nothing and returns null.
  Config config = Config::FromEnv();
  std::unique_ptr<CanaryManager> canary = CanaryManager::Install(config, install_args);
  if (canary == nullptr) {
    std::printf("KVCANARY_MODE=%s: kvcanary is off, the engine runs unchecked\n",
                ModeName(config.mode));
    return 0;
  }
  std::vector<ViolationRow> violations;
  canary->SetViolationListener(
      [&violations](const ViolationRow& row, int64_t) { violations.push_back(row); });
  canary->MarkInitFinished();  // after CUDA-graph capture and warm-up
  // [readme install]

  constexpr int kSteps = 8;
  constexpr int kCorruptAfterStep = 3;
  // Request 1's positions 2 (corrupted) and 3 (whose chain hash covers position 2).
  const int64_t corrupted_position = 2;
  std::vector<int64_t> expected_slots;
  for (int step_index = 0; step_index < kSteps; ++step_index) {
    StepInput step = engine.Schedule();
    // [readme step]
    canary->BeginStep(step);  // phase 1, outside graphs
    canary->PreForward(0);    // phase 2: plan, HEAD verify + write (capturable)
    engine.Forward(step);     // the model writes the new tokens' KV
    canary->PostForward(0);   // phase 3: TAIL verify + write (capturable)
    canary->EndStep();        // phase 4: reads last step's violations back, reports them
    // [readme step]
    if (step_index == kCorruptAfterStep) {
      for (int64_t position : {corrupted_position, corrupted_position + 1}) {
        expected_slots.push_back(engine.req_to_token[1 * kContext + position]);
      }
      CorruptRecord(*canary, expected_slots[0]);
      std::printf("step %d: corrupted the record of slot %lld\n", step_index,
                  static_cast<long long>(expected_slots[0]));
    }
  }

  int64_t caught = 0;
  for (const ViolationRow& row : violations) {
    std::printf("violation: %s\n", FormatViolationFirstLine(row).c_str());
    if (std::find(expected_slots.begin(), expected_slots.end(), row.slot_idx) !=
        expected_slots.end()) {
      ++caught;
    }
  }
  const bool only_the_corruption = caught > 0 && caught == static_cast<int64_t>(violations.size());
  std::printf("%s: %lld violation(s), %lld on the corrupted record or the one after it\n",
              only_the_corruption ? "PASS" : "FAIL", static_cast<long long>(violations.size()),
              static_cast<long long>(caught));
  return only_the_corruption ? 0 : 1;
}
