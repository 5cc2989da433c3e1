#include "rlx/compile_cache.h"

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "rlx/error.h"
#include "rlx/op.h"
#include "rlx/settings.h"

namespace rlx {

namespace {

// FNV-1a 64 over a stream of fields; each field is length-prefixed so that ("ab","c")
// and ("a","bc") differ.
class Hasher {
 public:
  void bytes(const void* p, size_t n) {
    u64(n);
    raw(p, n);
  }
  void str(std::string_view s) { bytes(s.data(), s.size()); }
  void u64(uint64_t v) { raw(&v, sizeof v); }
  uint64_t value() const { return h_; }

 private:
  void raw(const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    for (size_t i = 0; i < n; ++i) h_ = (h_ ^ b[i]) * 0x100000001b3ull;
  }
  uint64_t h_ = 0xcbf29ce484222325ull;
};

void hash_graph(const Graph& g, Hasher& h) {
  h.u64(g.args().size());
  for (const Arg& a : g.args()) {
    h.str(a.name);
    h.u64(uint64_t(a.kind));
    h.str(a.value.type().str());
  }
  h.u64(g.nodes().size());
  for (const Node& n : g.nodes()) {
    h.str(n.op->name);
    h.u64(n.inputs.size());
    for (Value v : n.inputs) h.u64(uint64_t(v.id));
    std::vector<uint8_t> enc = n.attrs.encode();
    h.bytes(enc.data(), enc.size());
    h.u64(n.outputs.size());
    for (Value v : n.outputs) {
      h.u64(uint64_t(v.id));
      h.str(v.type().str());
    }
    h.u64(n.subgraphs.size());
    for (const SubgraphPtr& s : n.subgraphs) hash_graph(*s, h);
  }
  h.u64(g.outputs().size());
  for (const Output& o : g.outputs()) {
    h.str(o.name);
    h.u64(uint64_t(o.value.id));
  }
}

// A blob on disk: magic, payload size and hash, payload — so a truncated or altered file
// reads as a miss.
constexpr char kMagic[8] = {'R', 'L', 'X', 'C', 'A', 'C', 'H', '1'};
constexpr size_t kHeader = sizeof kMagic + 2 * sizeof(uint64_t);

uint64_t blob_hash(std::string_view bytes) {
  Hasher h;
  h.bytes(bytes.data(), bytes.size());
  return h.value();
}

bool valid_key(std::string_view key) {
  if (key.empty() || key == "." || key == "..") return false;
  for (char c : key)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-'))
      return false;
  return true;
}

}  // namespace

// Value ids are the SSA numbering, which equal graphs share: a graph and its clone, or
// the same model built twice, number their values alike.
uint64_t graph_hash(const Graph& g) {
  Hasher h;
  hash_graph(g, h);
  return h.value();
}

DiskCache::DiskCache(std::string dir) : dir_(std::move(dir)) {
  if (dir_.empty()) fail<ValueError>("DiskCache", "expected a directory, got an empty path");
}

std::string DiskCache::default_dir() {
  if (!settings().cache_dir.empty()) return settings().cache_dir;
  if (const char* d = std::getenv("XDG_CACHE_HOME"); d && *d) return std::string(d) + "/rlx";
  if (const char* d = std::getenv("HOME"); d && *d) return std::string(d) + "/.cache/rlx";
  return "/tmp/rlx-cache";
}

std::string DiskCache::path_of(std::string_view key) const {
  if (!valid_key(key))
    fail<ValueError>("DiskCache", "expected a key of [A-Za-z0-9._-], got '", key, "'");
  return dir_ + "/" + std::string(key);
}

std::optional<std::string> DiskCache::get(std::string_view key) const {
  std::ifstream f(path_of(key), std::ios::binary);
  if (!f) return std::nullopt;
  std::ostringstream ss;
  ss << f.rdbuf();
  if (f.bad()) return std::nullopt;
  std::string blob = std::move(ss).str();
  if (blob.size() < kHeader || blob.compare(0, sizeof kMagic, kMagic, sizeof kMagic) != 0)
    return std::nullopt;
  uint64_t size = 0, hash = 0;
  std::memcpy(&size, blob.data() + sizeof kMagic, sizeof size);
  std::memcpy(&hash, blob.data() + sizeof kMagic + sizeof size, sizeof hash);
  std::string_view payload(blob.data() + kHeader, blob.size() - kHeader);
  if (payload.size() != size || blob_hash(payload) != hash) return std::nullopt;
  return std::string(payload);
}

bool DiskCache::put(std::string_view key, std::string_view bytes) const {
  std::string path = path_of(key);
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  static std::atomic<uint64_t> counter{0};
  std::string tmp = path + ".tmp" + std::to_string(getpid()) + "." + std::to_string(counter++);
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) return false;
    uint64_t size = bytes.size(), hash = blob_hash(bytes);
    f.write(kMagic, sizeof kMagic);
    f.write(reinterpret_cast<const char*>(&size), sizeof size);
    f.write(reinterpret_cast<const char*>(&hash), sizeof hash);
    f.write(bytes.data(), std::streamsize(bytes.size()));
    f.flush();
    if (!f) {
      f.close();
      std::filesystem::remove(tmp, ec);
      return false;
    }
  }
  std::filesystem::rename(tmp, path, ec);
  if (ec) std::filesystem::remove(tmp, ec);
  return !ec;
}

bool DiskCache::erase(std::string_view key) const {
  std::error_code ec;
  return std::filesystem::remove(path_of(key), ec);
}

}  // namespace rlx
