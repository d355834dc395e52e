// The shapes the bench times: the standard suite and its quick scale.
#include "bench/cases.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace kvcanary::bench {
namespace {

constexpr int64_t kQuickDivisor = 16;

int64_t Scale(int64_t size) { return std::max<int64_t>(size / kQuickDivisor, 1); }

BenchCase CaseNamed(const Suite& suite, std::string_view name) {
  for (const BenchCase& c : suite.cases) {
    if (c.name == name) return c;
  }
  throw std::logic_error("bench: no case named " + std::string(name));
}

}  // namespace

const char* RealDataName(RealData mode) { return mode == RealData::kPartial ? "partial" : "none"; }

Suite StandardSuite() {
  Suite suite;
  suite.name = "standard";
  suite.num_slots = 2'000'000;
  suite.req_to_token_rows = 4096;
  suite.req_to_token_cols = 32768;
  suite.default_reps = 20;
  suite.cases = {
      {"decode-1", 1, 4096, 1},     {"decode-64", 64, 4096, 1},
      {"decode-256", 256, 4096, 1}, {"decode-1024", 1024, 4096, 1},
      {"long-32", 32, 32768, 1},    {"prefill-2k", 1, 0, 2048},
      {"prefill-8k", 1, 0, 8192},   {"prefill-mixed", 16, 1024, 512},
  };
  // The decode and prefill steps again over a block table.
  for (const char* name : {"decode-256", "prefill-8k", "prefill-mixed"}) {
    BenchCase paged = CaseNamed(suite, name);
    paged.name += "-paged";
    paged.block_size = kPagedBlockSize;
    suite.cases.push_back(paged);
  }
  // The steps that verify a prefix again with sampled verify.
  for (const char* name : {"decode-64", "decode-256", "decode-1024", "long-32", "prefill-mixed"}) {
    for (int64_t sample : kBenchVerifySamples) {
      BenchCase sampled = CaseNamed(suite, name);
      sampled.name += "-k" + std::to_string(sample);
      sampled.verify_sample = sample;
      suite.cases.push_back(sampled);
    }
  }
  return suite;
}

Suite QuickSuite() {
  Suite suite = StandardSuite();
  suite.name = "quick";
  suite.num_slots = Scale(suite.num_slots) / kPagedBlockSize * kPagedBlockSize;
  suite.req_to_token_rows = Scale(suite.req_to_token_rows);
  suite.req_to_token_cols = Scale(suite.req_to_token_cols);
  // Small cases time in microseconds; more repetitions steady the median at no real cost.
  suite.default_reps = 50;
  for (BenchCase& c : suite.cases) {
    c.batch = Scale(c.batch);
    c.prefix = c.prefix == 0 ? 0 : Scale(c.prefix);
    c.extend = Scale(c.extend);
  }
  return suite;
}

const std::vector<std::string>& SuiteNames() {
  static const std::vector<std::string> names = {"quick", "standard"};
  return names;
}

void KeepCases(Suite& suite, const std::vector<std::string>& names) {
  std::vector<BenchCase> kept;
  for (const std::string& name : names) {
    const auto found = std::find_if(suite.cases.begin(), suite.cases.end(),
                                    [&](const BenchCase& c) { return c.name == name; });
    if (found == suite.cases.end()) {
      std::string known;
      for (const BenchCase& c : suite.cases) known += (known.empty() ? "" : ", ") + c.name;
      throw std::invalid_argument("--cases: no case named '" + name + "' in suite " + suite.name +
                                  " (" + known + ")");
    }
    if (std::find_if(kept.begin(), kept.end(), [&](const BenchCase& c) { return c.name == name; }) ==
        kept.end()) {
      kept.push_back(*found);
    }
  }
  suite.cases = std::move(kept);
}

Suite SuiteByName(std::string_view name) {
  if (name == "standard") return StandardSuite();
  if (name == "quick") return QuickSuite();
  throw std::invalid_argument("unknown suite '" + std::string(name) + "' (quick, standard)");
}

}  // namespace kvcanary::bench
