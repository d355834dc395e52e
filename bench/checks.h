// Checks of a case's outputs before it is timed, and after (STYLE rule 22): a bench that times
// launches which skip their work, or that find violations, measures the wrong thing.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

#include "bench/cases.h"
#include "bench/input_sets.h"
#include "bench/layout.h"
#include "bench/pool.h"

namespace kvcanary::bench {

class CheckFailed : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Runs every set's step once, then checks: each plan's counts and first and last entries against
// the layout; that no launch recorded a violation; that every tag's counters moved by exactly the
// entries and tokens planned; that a written record holds its token, position and fingerprint;
// and that verify reports a record broken on purpose (which is then restored). Throws
// CheckFailed naming the case and what differed.
void CheckCase(Pool& pool, const CaseLayout& layout, const std::vector<InputSet>& sets,
               RealData mode);

// Throws CheckFailed if any launch since the last check recorded a violation.
void CheckNoViolations(const Pool& pool, const std::string& where);

}  // namespace kvcanary::bench
