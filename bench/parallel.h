// Host-side helpers for building workloads: a seeded generator and a parallel loop over the
// cores (filling half a gigabyte of random slots one-threaded would dominate a quick run).
#pragma once

#include <cstdint>
#include <thread>
#include <utility>
#include <vector>

#include "kvcanary/hash.h"

namespace kvcanary::bench {

// splitmix64 as a generator: fast, seedable, and good enough for benchmark data.
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t Next() {
    state_ += 0x9E3779B97F4A7C15ull;
    return Splitmix64(state_);
  }
  // Uniform in [0, n) by multiply-shift; the bias (< n / 2^64) is irrelevant here.
  // REQUIRES: n > 0.
  uint64_t Below(uint64_t n) {
    return static_cast<uint64_t>((static_cast<unsigned __int128>(Next()) * n) >> 64);
  }

 private:
  uint64_t state_;
};

// Fisher-Yates. Shuffling an already shuffled sequence again yields a fresh uniform permutation.
template <typename T>
void Shuffle(std::vector<T>& values, Rng& rng) {
  for (int64_t i = static_cast<int64_t>(values.size()) - 1; i > 0; --i) {
    std::swap(values[i], values[rng.Below(i + 1)]);
  }
}

inline int HostThreads() {
  const unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : static_cast<int>(n);
}

// Calls body(thread, begin, end) on HostThreads() threads, each with a contiguous part of
// [0, n).
// Runs inline when n <= 1: starting threads for one chunk of work costs more than the work.
template <typename Body>
void ParallelChunks(int64_t n, Body&& body) {
  if (n <= 1) {
    body(0, 0, n);
    return;
  }
  const int threads = HostThreads();
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] { body(t, n * t / threads, n * (t + 1) / threads); });
  }
  for (std::thread& thread : pool) thread.join();
}

}  // namespace kvcanary::bench
