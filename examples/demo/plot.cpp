#include "plot.h"

#include <cmath>
#include <cstdio>
#include <fstream>

#include "rlx/error.h"

namespace demo {

void write_csv(const std::string& path, const std::vector<LossPoint>& points) {
  std::ofstream f(path);
  if (!f) rlx::fail<rlx::IoError>("demo", "cannot write ", path);
  f << "step,train_loss,val_loss,lr\n";
  for (const LossPoint& p : points) {
    f << p.step << ',' << p.train_loss << ',';
    if (!std::isnan(p.val_loss)) f << p.val_loss;  // empty cell: gnuplot skips it
    f << ',' << p.lr << '\n';
  }
}

bool plot_png(const std::string& csv_path, const std::string& png_path, double entropy) {
  if (std::system("command -v gnuplot >/dev/null 2>&1") != 0) return false;
  FILE* gp = popen("gnuplot 2>/dev/null", "w");
  if (!gp) return false;
  std::fprintf(gp,
               "set terminal pngcairo size 900,540 noenhanced\n"
               "set output '%s'\n"
               "set datafile separator ','\n"
               "set datafile missing ''\n"
               "set title 'rlx char-GPT on the KJV excerpt'\n"
               "set xlabel 'step'\nset ylabel 'cross entropy (nats)'\nset grid\n"
               "set key top right\n"
               "plot '%s' using 1:2 skip 1 with lines lc rgb '#8fb8de' title 'train (batch)', "
               "'' using 1:3 skip 1 with linespoints pt 7 ps 0.6 lc rgb '#d1495b' "
               "title 'val', %.6f with lines dt 2 lc rgb '#555555' title 'unigram entropy'\n",
               png_path.c_str(), csv_path.c_str(), entropy);
  return pclose(gp) == 0;
}

}  // namespace demo
