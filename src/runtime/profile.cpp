#include "runtime/profile.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "rlx/op.h"

namespace rlx {

namespace {

struct Entry {
  int64_t calls = 0;
  double seconds = 0;
};

struct Profile {
  std::mutex mu;
  std::map<std::string, Entry> by_key;
  ~Profile() {
    std::vector<std::pair<std::string, Entry>> rows(by_key.begin(), by_key.end());
    std::sort(rows.begin(), rows.end(),
              [](const auto& a, const auto& b) { return a.second.seconds > b.second.seconds; });
    double total = 0;
    for (const auto& r : rows) total += r.second.seconds;
    std::fprintf(stderr, "rlx profile: %.3f ms in kernels\n", total * 1e3);
    for (const auto& [key, e] : rows)
      std::fprintf(stderr, "  %9.3f ms %5.1f%% %7lld calls  %s\n", e.seconds * 1e3,
                   total > 0 ? 100 * e.seconds / total : 0.0, (long long)e.calls, key.c_str());
  }
};

Profile& profile() {
  static Profile p;
  return p;
}

}  // namespace

bool profiling() {
  static const bool on = [] {
    const char* e = std::getenv("RLX_PROFILE");
    return e && *e && std::string(e) != "0";
  }();
  return on;
}

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
}

}  // namespace rlx
