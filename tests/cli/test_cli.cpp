// Tests of the kvcanary command as a user runs it: the built binary, its exit status and the one
// line it prints. Exit statuses: 0 pass, 1 a failed run, 2 bad arguments, 3 a run-time error.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>

#include "sim/sim_flags.h"

namespace {

struct CliResult {
  int status = -1;     // the exit status, -1 when the command did not exit normally
  std::string output;  // stdout and stderr together
};

// Runs the binary with `args` through the shell; `shell_prefix` goes before it ("ulimit ... && ").
CliResult RunCli(const std::string& args, const std::string& shell_prefix = "") {
  const std::string command = shell_prefix + std::string(KVCANARY_BIN) + " " + args + " 2>&1";
  CliResult result;
  std::FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return result;
  char buffer[4096];
  size_t read = 0;
  while ((read = std::fread(buffer, 1, sizeof(buffer), pipe)) > 0) result.output.append(buffer, read);
  const int wait_status = pclose(pipe);
  if (WIFEXITED(wait_status)) result.status = WEXITSTATUS(wait_status);
  return result;
}

void ExpectExit(const std::string& args, int status, const std::string& message) {
  const CliResult result = RunCli(args);
  EXPECT_EQ(result.status, status) << args << "\n" << result.output;
  EXPECT_NE(result.output.find(message), std::string::npos)
      << args << ": expected '" << message << "' in:\n" << result.output;
}

TEST(KvcanaryCli, EachBadSimFlagExitsTwoWithItsMessage) {
  const std::pair<const char*, const char*> cases[] = {
      {"--steps 12x", "--steps must be an integer in [0, 1000000], got '12x'"},
      {"--steps -1", "--steps must be an integer in [0, 1000000], got '-1'"},
      {"--requests 1000001", "--requests must be an integer in [0, 1000000], got '1000001'"},
      {"--seed -1", "--seed must be an integer in [0, 2^64 - 1], got '-1'"},
      {"--layers 0", "--layers must be an integer in [1, 256], got '0'"},
      {"--bytes-per-token 1048576",
       "--bytes-per-token must be an integer in [16, 65536], got '1048576'"},
      {"--bytes-per-token 24", "--bytes-per-token must be a positive multiple of 16, got 24"},
      {"--num-slots 99999999999999999999",
       "--num-slots must be an integer in [2, 16777216], got '99999999999999999999'"},
      {"--mode warn", "--mode must be one of none, log, raise, got 'warn'"},
      {"--mode ''", "--mode must be a non-empty none|log|raise, got ''"},
      {"--pool-layout gqa", "--pool-layout must be one of mha, mla, got 'gqa'"},
      {"--compress-ratio 1", "--compress-ratio must be 0 (no compressed pool) or at least 2, got 1"},
      {"--compress-ratio 4 --swa-window 64", "--compress-ratio cannot be combined with"},
      {"--faults compressed_slot_stale",
       "--faults: compressed_slot_stale does not apply to this engine: it needs --compress-ratio > 1"},
      {"--bogus", "The following argument was not expected: --bogus"},
  };
  for (const auto& [args, message] : cases) {
    ExpectExit(std::string("sim --quiet ") + args, 2, message);
  }
}

// The command's options come from the flag table: every row is there, with its range.
TEST(KvcanaryCli, SimHelpListsEveryTableFlagWithItsRange) {
  const CliResult help = RunCli("sim --help");
  ASSERT_EQ(help.status, 0) << help.output;
  for (const kvcanary::sim::SimFlag& flag : kvcanary::sim::SimFlagTable()) {
    EXPECT_NE(help.output.find(std::string("--") + flag.name), std::string::npos) << flag.name;
    if (flag.kind != kvcanary::sim::FlagKind::kInteger) continue;
    EXPECT_NE(help.output.find("in " + kvcanary::sim::FlagRange(flag)), std::string::npos)
        << flag.name;
  }
}

TEST(KvcanaryCli, EveryIntegerFlagRejectsOnePastEitherBound) {
  for (const kvcanary::sim::SimFlag& flag : kvcanary::sim::SimFlagTable()) {
    if (flag.kind != kvcanary::sim::FlagKind::kInteger) continue;
    for (const int64_t outside : {flag.min - 1, flag.max + 1}) {
      const std::string text = std::to_string(outside);
      ExpectExit(std::string("sim --quiet --") + flag.name + " " + text, 2,
                 std::string("--") + flag.name + " must be an integer in " +
                     kvcanary::sim::FlagRange(flag) + ", got '" + text + "'");
    }
  }
}

// An int64 that does not fit an int once ran no step at all and passed.
TEST(KvcanaryCli, HugeStepsIsAUsageErrorNotAnEmptyPass) {
  ExpectExit("sim --quiet --steps 8589934592", 2,
             "kvcanary sim: --steps must be an integer in [0, 1000000], got '8589934592'");
}

TEST(KvcanaryCli, HugeFaultRateFailsQuickly) {
  const auto start = std::chrono::steady_clock::now();
  ExpectExit("sim --quiet --fault-rate 1e9", 2, "--fault-rate must be an integer in [0, 10000]");
  ExpectExit("sim --quiet --fault-rate 1000000000", 2, "got '1000000000'");
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
}

TEST(KvcanaryCli, BadBenchRepsExitTwoBeforeAnyTiming) {
  for (const char* reps : {"4294967316", "1e9", "50x", "19"}) {
    ExpectExit(std::string("bench --suite quick --reps ") + reps, 2,
               std::string("--reps: Value ") + reps + " not in range 20 to 1000000");
  }
}

TEST(KvcanaryCli, UnknownBenchCaseExitsTwoNamingTheSuitesCases) {
  ExpectExit("bench --suite quick --cases decode-256,decode-7", 2,
             "kvcanary bench: --cases: no case named 'decode-7' in suite quick (decode-1, ");
}

TEST(KvcanaryCli, EmptyJsonPathIsAUsageError) {
  ExpectExit("sim --quiet --json ''", 2, "--json must be a non-empty PATH, got ''");
  ExpectExit("bench --json ''", 2, "--json: must be a non-empty PATH");
}

TEST(KvcanaryCli, UnwritableJsonExitsThreeWithTheReason) {
  const std::string path = "/nonexistent-kvcanary-dir/report.json";
  ExpectExit("sim --quiet --json " + path, 3,
             "kvcanary sim: --json: cannot write " + path + ": No such file or directory");
  ExpectExit("bench --suite quick --json " + path, 3,
             "kvcanary bench: --json: cannot write " + path + ": No such file or directory");
}

// A file that opens but cannot take the report: the failure shows at the write, with its reason.
TEST(KvcanaryCli, JsonWriteFailureExitsThree) {
  if (!std::filesystem::exists("/dev/full")) GTEST_SKIP() << "no /dev/full";
  ExpectExit("sim --quiet --steps 20 --faults none --json /dev/full", 3,
             "--json: writing /dev/full failed: No space left on device");
}

// Sizes inside the flag ranges can still ask for more memory than the machine has: a pool of
// 2^24 slots x 64 KiB per layer is a run-time error (3), reported on one line, not a crash. The
// address space is capped so the test behaves the same on a machine that overcommits.
TEST(KvcanaryCli, AllocationFailureExitsThree) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "AddressSanitizer reserves more address space than the cap allows";
#endif
  const std::string args =
      "sim --quiet --steps 10 --faults none --num-slots 16777216 --bytes-per-token 65536";
  const CliResult result = RunCli(args, "ulimit -v 4000000 && ");  // 4 GB of address space
  EXPECT_EQ(result.status, 3) << result.output;
  EXPECT_NE(result.output.find("kvcanary sim: scenario default: "), std::string::npos)
      << result.output;
  EXPECT_NE(result.output.find("memory"), std::string::npos) << result.output;
}

// The pool kinds' scenarios as a user runs them: each fault class of its own detected (exit 0),
// with quarantine too (its victims recomputed), and undetected without the canary (its negative
// control: exit 1).
TEST(KvcanaryCli, PoolKindScenariosDetectTheirFaultAndFailWithoutTheCanary) {
  const std::pair<const char*, const char*> runs[] = {
      {"mla", "mla_latent_page"},
      {"compressed", "compressed_slot_stale"},
  };
  for (const auto& [scenario, fault] : runs) {
    const std::string args =
        std::string("sim --quiet --steps 300 --scenario ") + scenario + " --faults " + fault;
    ExpectExit(args, 0, std::string("PASS: ") + scenario);
    ExpectExit(args + " --on-violation quarantine", 0, "no corrupted token delivered");
    ExpectExit(args + " --mode none", 1, std::string("FAIL: ") + scenario);
  }
}

TEST(KvcanaryCli, ShortCleanRunPassesAndWritesTheReport) {
  const std::filesystem::path path =
      std::filesystem::temp_directory_path() / "kvcanary_cli_test_report.json";
  std::filesystem::remove(path);
  ExpectExit("sim --quiet --steps 40 --faults none --json " + path.string(), 0, "PASS: default");
  EXPECT_GT(std::filesystem::file_size(path), 0u);
  std::filesystem::remove(path);
}

}  // namespace
