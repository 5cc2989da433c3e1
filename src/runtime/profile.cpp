#include "runtime/profile.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "rlx/op.h"
#include "rlx/settings.h"

namespace rlx {

namespace {

struct Entry {
  int64_t calls = 0;
  double seconds = 0;
  double fastest = 1e30;
  // A first call also pays one-time costs (lazy module loading, library heuristics): the
  // fastest call times the calls is what a steady run spends.
  double steady() const { return fastest * double(calls); }
};

struct Profile {
  std::mutex mu;
  std::map<std::string, Entry> by_key;
  ~Profile() {
    std::vector<std::pair<std::string, Entry>> rows(by_key.begin(), by_key.end());
    std::sort(rows.begin(), rows.end(),
              [](const auto& a, const auto& b) { return a.second.steady() > b.second.steady(); });
    double total = 0, steady = 0;
    for (const auto& r : rows) total += r.second.seconds, steady += r.second.steady();
    std::fprintf(stderr,
                 "rlx profile: %.3f ms in kernels, %.3f ms at each op's fastest call "
                 "(steady, sorted by)\n",
                 total * 1e3, steady * 1e3);
    for (const auto& [key, e] : rows)
      std::fprintf(stderr, "  %9.3f ms steady %5.1f%% %9.3f ms all %7lld calls  %s\n",
                   e.steady() * 1e3, steady > 0 ? 100 * e.steady() / steady : 0.0, e.seconds * 1e3,
                   (long long)e.calls, key.c_str());
  }
};

Profile& profile() {
  static Profile p;
  return p;
}

}  // namespace

bool profiling() { return settings().profile; }

void record_op_time(const Node& n, double seconds) {
  std::string key = n.op_name();
  for (size_t i = 0; i < n.inputs.size(); ++i) {
    key += i ? ',' : ' ';
    key += n.inputs[i].type().str();
  }
  Profile& p = profile();
  std::lock_guard lock(p.mu);
  Entry& e = p.by_key[key];
  ++e.calls;
  e.seconds += seconds;
  e.fastest = std::min(e.fastest, seconds);
}

}  // namespace rlx
