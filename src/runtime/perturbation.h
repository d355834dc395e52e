// Fault injection: corrupts the state a detection path watches, once per
// step with a configured probability, so a test can prove that path is live. Testing only; an
// engine never enables it in production.
//
//   kind                  when                          corrupts
//   req_to_token          phase 1                       a live req_to_token entry
//   real_kv_used          phase 1                       first layer-0 K byte of a live slot
//   real_kv_unused_cache  phase 1, on sweep steps       first layer-0 K byte of an orphan slot
//   real_kv_post_forward  phase 4, after TAIL           first layer-0 K byte of a just-written slot
//   real_perturb_bytes    phase 1                       a random folded K byte of a random
//                                                       fingerprinted layer at an orphan slot
//                                                       (else, unless require_orphan, a live one)
//   next_token_swap       sampler exit                  two sampled tokens
//
// Phase 1 and 4 kinds read the batch of inner forward 0 (tables and slots through synchronous
// copies); next_token_swap counts its own calls for the warm-up.
//
// Thread safety: none; the owning CanaryManager's thread calls it, like every runtime method.
// Invariants: the RNG is seeded once from PerturbConfig::seed (R8) and advances only when a gate
// draws or a fired perturbation picks its target, so a run is reproducible; canary buffers are
// never touched.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kvcanary/context.h"
#include "kvcanary/runtime/canary_manager.h"
#include "runtime/token_table.h"
#include "kvcanary/runtime/config.h"

namespace kvcanary::runtime {

struct ForwardState;
struct GroupState;

// What the perturber may see and use of the runtime that owns it, and nothing more: the groups
// (their sources and tables), the batch of inner forward 0, the step, the radix view, the
// install's token table, the sweep interval, the compute stream, the log and the listener.
class PerturbationHost {
 public:
  virtual const std::vector<GroupState>& Groups() const = 0;
  virtual const ForwardState& FirstForward() const = 0;
  virtual int64_t OuterStep() const = 0;
  virtual const RadixView* Radix() const = 0;
  virtual const TokenTable& InstalledTable() const = 0;
  virtual int64_t SweepInterval() const = 0;
  virtual RealKvHashMode RealData() const = 0;
  virtual StreamHandle Stream() const = 0;
  virtual void Log(LogLevel level, const std::string& message) const = 0;
  virtual void Emit(const PerturbationEvent& event) const = 0;

 protected:
  ~PerturbationHost() = default;
};

// Where a byte flip lands: the slot in the group's own slot space, and the first byte of its
// strip in the source tensor viewed as a byte matrix.
struct FlipAddress {
  int64_t slot = -1;
  int64_t row = -1;
  int64_t col = -1;
};

// Flip addressing. A defined `full_to_swa` (an SWA group; int32 or int64, read from its
// device) first translates the logical slot; then row = slot / page_size and col = (slot %
// page_size) * num_bytes_per_token. nullopt when the logical slot is negative or outside the
// table, the translated slot is negative, or the row is outside the source.
std::optional<FlipAddress> LocateFlip(int64_t logical_slot, const TensorView& full_to_swa,
                                      const RealKvSource& source, StreamHandle stream);

// The perturbation RNG: a splitmix64 sequence, identical on every platform (the standard
// distributions are not specified bit-for-bit).
class PerturbRng {
 public:
  explicit PerturbRng(uint64_t seed) : state_(seed) {}
  uint64_t Next();
  // Uniform in [0, 1), 53 bits.
  double Uniform();
  // Uniform in [0, n). REQUIRES: n > 0.
  int64_t Below(int64_t n);

 private:
  uint64_t state_;
};

class Perturber {
 public:
  // REQUIRES: config validated. Keeps a reference to `host`, which owns this object.
  Perturber(const PerturbationHost& host, const PerturbConfig& config);

  // Phase 1, after the capacity checks and before the HEAD split verification:
  // req_to_token, real_kv_used, real_kv_unused_cache, then real_perturb_bytes.
  void BeforeForward();
  // Phase 4 step 2, after the TAIL split verification and before the sweep.
  void AfterForward();
  // next_token_swap at sampler exit.
  void PerturbNextTokens(std::vector<int64_t>& sampled);

 private:
  // A req_to_token entry of the batch not written this step.
  struct ActiveEntry {
    int64_t req_pool_idx = 0;
    int64_t position = 0;
    int64_t slot = 0;
    int64_t seq_len = 0;
  };

  // The gate: probability, warm-up, batch, then one Bernoulli draw.
  bool ShouldRun(const char* name, double probability, int64_t step, bool has_batch);
  // A random group of the target kind with K sources; -1 (after an INFO) when there is none.
  // Throws the config's target-group error when the target group is unset.
  int PickGroup(const char* name);
  void Skip(const char* name, const std::string& reason) const;
  // XORs 0xFF into a byte of `logical_slot`'s strip in a random fingerprinted K layer of the
  // group: the first byte, or with `random_byte` one of the bytes the real-KV hash folds.
  void Flip(const char* name, int group, int64_t logical_slot, int64_t req_pool_idx,
            int64_t position, int64_t step, bool random_byte = false);
  // How many leading bytes of a strip of `source` the configured real-KV hash folds (>= 1).
  int64_t FoldedBytes(const RealKvSource& source) const;
  void Emit(const PerturbationEvent& event) const;

  std::vector<ActiveEntry> CollectActive(const ForwardState& forward) const;
  // CollectActive's entries whose slot the group holds (an SWA group: the last W positions).
  std::vector<ActiveEntry> LiveEntries(const ForwardState& forward, int group) const;
  // The non-padded part of the forward's out_cache_loc (slot 0 is padding).
  std::vector<int64_t> WrittenSlots(const ForwardState& forward) const;
  TokenTable TableOf(const ForwardState& forward) const;

  void PerturbReqToToken(const ForwardState& forward, int64_t step);
  void PerturbRealKvUsed(const ForwardState& forward, int64_t step);
  void PerturbRealKvUnusedCache(int64_t step);
  void PerturbRealKvPostForward(const ForwardState& forward, int64_t step);
  // perturbation_orphan.cpp: real_perturb_bytes and the orphan slots it prefers.
  void PerturbRealBytes(const ForwardState& forward, int64_t step);
  // A cached slot and its position (depth) in the radix view.
  struct CachedSlot {
    int64_t slot = 0;
    int64_t position = 0;
  };
  // The orphan slots: slots >= 1 of unlocked radix nodes (SWA-resident ones for an SWA group)
  // that no batch entry of `forward` reads or writes, in walk order; none without a radix view.
  std::vector<CachedSlot> OrphanSlots(const ForwardState& forward, bool swa) const;

  const PerturbationHost& host_;
  PerturbConfig config_;
  PerturbRng rng_;
  bool warmup_logged_ = false;
  bool enabled_logged_ = false;
  int64_t sampler_step_ = 0;
};

}  // namespace kvcanary::runtime
