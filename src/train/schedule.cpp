#include <cmath>
#include <numbers>

#include "rlx/train.h"

namespace rlx::train {

LrSchedule constant_lr(double lr) {
  return [lr](int64_t) { return lr; };
}

LrSchedule warmup_cosine(double peak, int64_t warmup_steps, int64_t total_steps, double min_lr) {
  if (warmup_steps < 0 || total_steps <= 0 || warmup_steps > total_steps)
    fail<ValueError>("train.warmup_cosine",
                     "expected 0 <= warmup_steps <= total_steps and total_steps > 0, got "
                     "warmup_steps ",
                     warmup_steps, ", total_steps ", total_steps);
  return [=](int64_t step) {
    if (step < warmup_steps) return peak * double(step) / double(warmup_steps);
    if (step >= total_steps) return min_lr;
    double t = double(step - warmup_steps) / double(total_steps - warmup_steps);
    return min_lr + (peak - min_lr) * 0.5 * (1.0 + std::cos(std::numbers::pi * t));
  };
}

LrSchedule step_lr(double base, int64_t step_size, double gamma) {
  if (step_size <= 0) fail<ValueError>("train.step_lr", "expected step_size > 0, got ", step_size);
  return [=](int64_t step) { return base * std::pow(gamma, double(step / step_size)); };
}

}  // namespace rlx::train
