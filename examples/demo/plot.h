// The loss curve: a CSV file, and a PNG drawn by gnuplot when it is installed.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace demo {

struct LossPoint {
  int64_t step;
  double train_loss;  // this step's batch
  double val_loss;    // NaN when not evaluated at this step
  double lr;
};

void write_csv(const std::string& path, const std::vector<LossPoint>& points);

// Plots the CSV at csv_path (train and val loss against the step, and the unigram
// entropy as a reference line) into png_path. Returns false when gnuplot is missing or
// fails.
bool plot_png(const std::string& csv_path, const std::string& png_path, double entropy);

}  // namespace demo
