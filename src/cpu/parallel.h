// A deterministic parallel loop for the CPU backend: [0, n) is cut into one contiguous chunk per
// thread, so per-chunk results concatenated in chunk order equal a serial run's.
#pragma once

#include <cstdint>
#include <vector>

#if defined(KVC_HAVE_OPENMP)
#include <omp.h>
#endif

namespace kvcanary::cpu {

// Below this many items a loop runs on the calling thread: thread start-up would cost more.
inline constexpr int64_t kMinItemsPerThread = 4096;

inline int ChunkCount(int64_t n) {
#if defined(KVC_HAVE_OPENMP)
  const int64_t by_size = n / kMinItemsPerThread;
  const int64_t threads = omp_get_max_threads();
  return static_cast<int>(by_size < 1 ? 1 : (by_size < threads ? by_size : threads));
#else
  (void)n;
  return 1;
#endif
}

// Calls body(chunk, begin, end) for each chunk of [0, n), chunks possibly in parallel.
template <typename Body>
void ForEachChunk(int64_t n, int chunks, Body&& body) {
  auto run = [&](int chunk) {
    const int64_t begin = n * chunk / chunks;
    const int64_t end = n * (chunk + 1) / chunks;
    body(chunk, begin, end);
  };
  if (chunks <= 1) {
    run(0);
    return;
  }
#if defined(KVC_HAVE_OPENMP)
#pragma omp parallel for schedule(static, 1) num_threads(chunks)
  for (int chunk = 0; chunk < chunks; ++chunk) run(chunk);
#else
  for (int chunk = 0; chunk < chunks; ++chunk) run(chunk);
#endif
}

}  // namespace kvcanary::cpu
