// A captured CUDA graph and its executable, destroyed with the owner (before the buffers the graph
// names, when declared after them). Shared by the op and runtime graph-replay tests.
#pragma once

#include <cuda_runtime.h>

namespace kvcanary::testing {

struct OwnedGraph {
  OwnedGraph() = default;
  OwnedGraph(const OwnedGraph&) = delete;
  OwnedGraph& operator=(const OwnedGraph&) = delete;
  ~OwnedGraph() {
    if (exec != nullptr) cudaGraphExecDestroy(exec);
    if (graph != nullptr) cudaGraphDestroy(graph);
  }
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
};

}  // namespace kvcanary::testing
