// Engine::CheckUnitOwnership, which RunScenario calls after every run: the allocator and the
// holders of its units (running requests, cached prefixes) agree, and a leaked unit or a held
// one the allocator thinks free is reported by number.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "kvcanary/runtime/log.h"
#include "sim/engine.h"
#include "sim/no_hooks.h"
#include "sim/sim_options.h"

namespace kvcanary::sim {
namespace {

class QuietLog : public runtime::LogSink {
 public:
  void Log(runtime::LogLevel, const std::string&) override {}
};

std::string OwnershipError(const Engine& engine) {
  try {
    engine.CheckUnitOwnership();
  } catch (const std::logic_error& error) {
    return error.what();
  }
  return "";
}

TEST(EngineOwnership, ALeakedUnitAndAFreedHeldUnitAreReported) {
  SimOptions options = ScenarioPreset("default");
  options.num_slots = 512;
  QuietLog log;
  Engine engine(options, "engine", &log);
  NoHooks hooks;
  EXPECT_EQ(OwnershipError(engine), "");

  RequestSpec spec;
  spec.prompt = {5, 6, 7, 8, 9, 10};
  spec.max_new_tokens = 8;
  engine.scheduler().Submit(spec);
  for (int64_t step = 0; step < 3; ++step) engine.Step(step, hooks);
  ASSERT_EQ(engine.scheduler().running().size(), 1u);
  EXPECT_EQ(OwnershipError(engine), "") << "the request holds what it was given";

  const std::vector<int64_t> leaked = *engine.allocator().Allocate(1);
  EXPECT_EQ(OwnershipError(engine), "kv-canary sim: allocation unit " + std::to_string(leaked[0]) +
                                        " is allocated but no request or cached prefix holds it "
                                        "(leaked)");
  engine.allocator().Free(leaked);

  const int64_t held = engine.scheduler().running().front()->slots.back();
  engine.allocator().Free({held});
  EXPECT_EQ(OwnershipError(engine), "kv-canary sim: allocation unit " + std::to_string(held) +
                                        " is held by a request or the cache but free");
}

}  // namespace
}  // namespace kvcanary::sim
