// The stderr progress bar.
#include "sim/progress.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <utility>

namespace kvcanary::sim {
namespace {

constexpr int kBarWidth = 30;
// Long statuses would wrap and break the carriage-return redraw on a narrow terminal.
constexpr size_t kMaxStatus = 40;

}  // namespace

bool ProgressEnabled(std::string_view mode) {
  if (mode == "on") return true;
  if (mode == "off") return false;
  return isatty(STDERR_FILENO) != 0;
}

ProgressBar::ProgressBar(std::string label, int64_t total, bool enabled, std::ostream& out)
    : label_(std::move(label)), total_(total), enabled_(enabled), out_(out) {}

ProgressBar::~ProgressBar() { Finish(); }

void ProgressBar::Update(int64_t done, std::string_view status) {
  if (!enabled_ || finished_) return;
  done_ = done;
  status_.assign(status.substr(0, kMaxStatus));
  const auto now = std::chrono::steady_clock::now();
  const bool last = total_ > 0 && done_ >= total_;
  // Redrawing every step would cost more than a fast step itself, and nobody reads 1000 lines/s.
  if (redraws_ > 0 && !last && now - last_draw_ < kMinRedrawInterval) {
    undrawn_ = true;
    return;
  }
  last_draw_ = now;
  Draw();
}

void ProgressBar::Finish() {
  if (!enabled_ || finished_) return;
  finished_ = true;
  if (redraws_ == 0) return;
  if (undrawn_) Draw();
  out_ << "\n" << std::flush;
}

void ProgressBar::Draw() {
  ++redraws_;
  undrawn_ = false;
  // "\r\033[K": back to the start of the line and clear it, so a shorter status leaves no tail.
  out_ << "\r\033[K" << label_ << " ";
  if (total_ > 0) {
    const double fraction = std::clamp(static_cast<double>(done_) / total_, 0.0, 1.0);
    const int filled = static_cast<int>(fraction * kBarWidth);
    char percent[16];
    std::snprintf(percent, sizeof(percent), "%3.0f%%", 100 * fraction);
    out_ << "[" << std::string(filled, '#') << std::string(kBarWidth - filled, '.') << "] " << done_
         << "/" << total_ << " " << percent;
  } else {
    out_ << done_;
  }
  if (!status_.empty()) out_ << " " << status_;
  out_ << std::flush;
}

}  // namespace kvcanary::sim
