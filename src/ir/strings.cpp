#include "rlx/strings.h"

#include <mutex>
#include <unordered_set>

namespace rlx {

namespace {
struct Pool {
  std::mutex mu;
  std::unordered_set<std::string> strings;  // nodes never move: handles stay valid
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
  return &*p.strings.emplace(s).first;
}

}  // namespace rlx
