// Quarantine (Config::on_violation quarantine): the runtime remembers each step's live rows and,
// when the reporter shows violation rows, names the requests they touched, so the engine can
// discard those requests' held-back tokens and recompute them instead of serving corrupt output.
#include <algorithm>
#include <string>

#include "runtime/canary_impl.h"

namespace kvcanary::runtime {

void CanaryManager::Impl::RecordStepForQuarantine() {
  for (int i = 0; i < step_.num_forwards; ++i) {
    const ForwardState& forward = forwards_[i];
    RecordedForward recorded;
    recorded.step = step_.outer;
    recorded.table = ForwardTokenTable(table_, forward.batch);
    for (const TableRowSpan& span : LiveRowSpans(recorded.table, forward.host)) {
      recorded.req_pool_indices.push_back(span.row);
      recorded.lengths.push_back(span.length);
    }
    affected_.Record(std::move(recorded));
  }
}

void CanaryManager::Impl::QuarantineRows(const std::vector<ViolationRow>& rows,
                                         bool ring_overflow) {
  const std::vector<int64_t> touched = affected_.Match(rows, ring_overflow, stream_);
  if (touched.empty()) return;
  std::string list;
  for (size_t i = 0; i < touched.size(); ++i) {
    list += (i ? ", " : "") + std::to_string(touched[i]);
  }
  Log(LogLevel::kWarning, "kv-canary: quarantine: " + std::to_string(touched.size()) +
                              " request(s) touched by violations at step=" +
                              std::to_string(step_.outer) + " req_pool_idx=[" + list + "]" +
                              (ring_overflow ? " (ring overflow: every live row)" : ""));
}

}  // namespace kvcanary::runtime
