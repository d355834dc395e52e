// A one-line progress bar on stderr for long simulator runs: shown when a person watches (stderr
// is a terminal), silent otherwise, so redirected output stays clean.
#pragma once

#include <chrono>
#include <cstdint>
#include <iostream>
#include <ostream>
#include <string>
#include <string_view>

namespace kvcanary::sim {

// Whether `--progress mode` shows a bar: "on" yes, "off" no, "auto" when stderr is a terminal.
// REQUIRES: mode is one of those three (ValidateOptions checks it).
bool ProgressEnabled(std::string_view mode);

// Draws "label [#####.....] done/total pct% status" over itself with a carriage return.
//
// Thread safety: none; one thread drives a bar.
// Invariants: nothing is written when disabled; at most one redraw per kMinRedrawInterval
// except the first and the last (done == total); after Finish() nothing more is written.
class ProgressBar {
 public:
  static constexpr std::chrono::milliseconds kMinRedrawInterval{100};

  // `out` must outlive the bar. total <= 0 means unknown: the bar shows only the count.
  ProgressBar(std::string label, int64_t total, bool enabled, std::ostream& out = std::cerr);
  ~ProgressBar();
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;

  // The run's length, when it becomes known after construction.
  void SetTotal(int64_t total) { total_ = total; }
  // Records progress; redraws unless the last redraw was less than kMinRedrawInterval ago.
  void Update(int64_t done, std::string_view status);
  // Draws the last state if a throttled Update left it undrawn, and ends the line (only if
  // anything was drawn). Idempotent; the destructor calls it.
  void Finish();

  bool enabled() const { return enabled_; }
  int64_t redraws() const { return redraws_; }

 private:
  void Draw();

  std::string label_;
  int64_t total_;
  bool enabled_;
  std::ostream& out_;
  int64_t done_ = 0;
  std::string status_;
  int64_t redraws_ = 0;
  bool finished_ = false;
  bool undrawn_ = false;  // an Update since the last Draw was throttled
  std::chrono::steady_clock::time_point last_draw_{};
};

}  // namespace kvcanary::sim
