#include "progress.h"

#include <cstdio>
#include <string>

namespace demo {

Progress::Progress(int64_t total) : total_(total) {}

double Progress::seconds() const {
  return std::chrono::duration<double>(Clock::now() - start_).count();
}

void Progress::update(int64_t step, double loss, int64_t tokens) {
  tokens_ += tokens;
  auto now = Clock::now();
  // Redrawing costs a write per step; ten times a second is smooth enough.
  if (step != total_ && now - last_draw_ < std::chrono::milliseconds(100)) return;
  last_draw_ = now;
  const double t = seconds();
  const double eta = step > 0 ? t / double(step) * double(total_ - step) : 0;
  const int width = 24, filled = int(width * step / total_);
  std::string bar(size_t(filled), '#');
  bar.resize(size_t(width), '.');
  std::fprintf(stderr, "\r  [%s] step %5lld/%lld  loss %.4f  %6.0f tok/s  ETA %3.0fs ", bar.c_str(),
               (long long)step, (long long)total_, loss, double(tokens_) / t, eta);
  std::fflush(stderr);
}

void Progress::finish() { std::fprintf(stderr, "\n"); }

}  // namespace demo
