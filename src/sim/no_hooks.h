// EngineHooks that change nothing: an engine that runs no fault (the PD prefill engine, whose
// decode side is the one under test; tests that drive an Engine directly).
#pragma once

#include <string>
#include <vector>

#include "sim/engine.h"

namespace kvcanary::sim {

class NoHooks : public EngineHooks {
 public:
  void BeforeForward(Engine&, Batch&, ForwardView&) override {}
  bool OnApiError(Engine&, const std::string&) override { return false; }
  void AfterForward(Engine&, const Batch&) override {}
  void OnSampled(Engine&, const Batch&, std::vector<int64_t>&) override {}
  void OnRestore(Engine&, std::vector<int64_t>&, const std::vector<int64_t>&) override {}
};

}  // namespace kvcanary::sim
