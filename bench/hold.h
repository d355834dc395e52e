// A kernel that keeps the stream busy while the host enqueues a timed region, so the events around
// the region measure device work only, not the host's graph-launch call (the bench times
// device work).
#pragma once

namespace kvcanary::bench {

// Enqueues one single-thread kernel on `stream` that spins for about `microseconds`. Returns the
// cudaError_t of the launch as an int.
int LaunchHold(double microseconds, void* stream);

}  // namespace kvcanary::bench
