#include "rlx/strings.h"

#include <functional>
#include <mutex>
#include <unordered_set>

namespace rlx {

namespace {
// Looked up by string_view: a string already held costs no allocation (a cast to strings
// interns every element, mostly repeats).
struct Hash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
struct Pool {
  std::mutex mu;
  std::unordered_set<std::string, Hash, std::equal_to<>> strings;  // nodes never move
};
Pool& pool() {
  static Pool* p = new Pool();  // never destroyed: handles may be read during exit
  return *p;
}
}  // namespace

StringHandle intern(std::string_view s) {
  if (s.empty()) return nullptr;
  Pool& p = pool();
  std::lock_guard lock(p.mu);
  auto it = p.strings.find(s);
  if (it == p.strings.end()) it = p.strings.emplace(s).first;
  return &*it;
}

}  // namespace rlx
