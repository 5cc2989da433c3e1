// A one-line progress bar on stderr, redrawn in place with '\r'.
#pragma once

#include <chrono>
#include <cstdint>

namespace demo {

class Progress {
 public:
  explicit Progress(int64_t total);
  // After step `step` (1-based) with this batch's loss and the tokens it held.
  void update(int64_t step, double loss, int64_t tokens);
  void finish();  // ends the line
  double seconds() const;

 private:
  using Clock = std::chrono::steady_clock;
  int64_t total_;
  int64_t tokens_ = 0;
  Clock::time_point start_ = Clock::now();
  Clock::time_point last_draw_{};
};

}  // namespace demo
