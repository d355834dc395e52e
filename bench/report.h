// The bench's output: one markdown table (the machine line first), and the same numbers as JSON.
#pragma once

#include <ostream>

#include "bench/runner.h"

namespace kvcanary::bench {

// The machine line, the suite and ceiling lines, then one row per case and real-data mode. Times
// read "median (min-max)" in microseconds.
void PrintTable(std::ostream& out, const BenchResults& results);

// The same numbers as a JSON document.
void WriteJson(std::ostream& out, const BenchResults& results);

}  // namespace kvcanary::bench
