// Large host buffers are kept for reuse: glibc hands allocations above its mmap threshold
// (at most 32 MiB) straight back to the kernel, so every run of a graph with big
// intermediates would page-fault its way through fresh memory again. Blocks of at least
// kMinPooled bytes are rounded to a size class (four per power of two, so at most 25%
// slack) and parked on free lists on release, up to a byte cap.
#include <cstdlib>
#include <map>
#include <mutex>
#include <vector>

#include "rlx/settings.h"
#include "rlx/tensor.h"

namespace rlx {

namespace {

constexpr size_t kMinPooled = size_t(256) << 10;

size_t size_class(size_t bytes) {
  size_t top = size_t(1) << (63 - __builtin_clzll(bytes));  // highest power of two <= bytes
  size_t step = std::max<size_t>(top / 4, 64);
  return (bytes + step - 1) / step * step;
}

size_t cap_from_settings() { return size_t(std::max<int64_t>(settings().host_cache_mb, 0)) << 20; }

struct HostPool {
  std::mutex mu;
  std::map<size_t, std::vector<void*>> free;  // by size class
  size_t cached = 0;
  size_t cap = cap_from_settings();

  void* take(size_t cls) {
    std::lock_guard lock(mu);
    auto it = free.find(cls);
    if (it == free.end() || it->second.empty()) return nullptr;
    void* p = it->second.back();
    it->second.pop_back();
    cached -= cls;
    return p;
  }
  void give(void* p, size_t cls) {
    {
      std::lock_guard lock(mu);
      if (cached + cls <= cap) {
        free[cls].push_back(p);
        cached += cls;
        return;
      }
    }
    std::free(p);
  }
  size_t clear() {
    std::lock_guard lock(mu);
    size_t n = cached;
    for (auto& [cls, list] : free)
      for (void* p : list) std::free(p);
    free.clear();
    cached = 0;
    return n;
  }
};

HostPool& pool() {
  static HostPool* p = new HostPool();  // never destroyed: buffers may outlive statics
  return *p;
}

}  // namespace

std::shared_ptr<Buffer> Buffer::allocate_host(size_t bytes) {
  // aligned_alloc needs a size that is a multiple of the alignment (and non-zero).
  size_t rounded =
      bytes < kMinPooled ? std::max<size_t>((bytes + 63) / 64 * 64, 64) : size_class(bytes);
  bool pooled = bytes >= kMinPooled;
  void* p = pooled ? pool().take(rounded) : nullptr;
  if (!p) p = std::aligned_alloc(64, rounded);
  if (!p)
    fail<ValueError>("Buffer", "expected to allocate ", bytes, " bytes on the host, got none");
  if (!pooled) return std::shared_ptr<Buffer>(new Buffer(p, bytes, Device::cpu(), std::free));
  return std::shared_ptr<Buffer>(
      new Buffer(p, bytes, Device::cpu(), [rounded](void* q) { pool().give(q, rounded); }));
}

size_t empty_host_cache() { return pool().clear(); }

}  // namespace rlx
