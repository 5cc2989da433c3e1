// Caching compiled work.
//
// In memory: Session::compile keeps the compiled programs of recent graphs, keyed by the
// graph's structural hash, the device, the options and the bound dims; compiling the same
// graph again costs a hash (CompileOptions::cache = false or RLX_COMPILE_CACHE=0 turn it
// off). On disk: a DiskCache of byte blobs for backends whose compiled artifacts are
// worth keeping across processes (the CUDA backend's NVRTC output).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "rlx/graph.h"

namespace rlx {

// A hash of everything that defines what g computes: args (names, kinds, types), nodes
// (ops, inputs, attrs, output types, subgraphs, recursively) and outputs (names). Equal
// graphs hash equal whatever their history; the graph's own name is left out.
uint64_t graph_hash(const Graph& g);

// Entries in the process-wide in-memory compile cache, and clearing it.
size_t compile_cache_size();
void clear_compile_cache();

// A directory of blobs named by key. Writes are atomic (a temporary file renamed into
// place), so concurrent processes never read half a blob; a missing, unreadable or
// truncated entry is a miss, never an error. Keys are [A-Za-z0-9._-]+ (ValueError else).
class DiskCache {
 public:
  explicit DiskCache(std::string dir);
  // $RLX_CACHE_DIR, else $XDG_CACHE_HOME/rlx, else ~/.cache/rlx, else /tmp/rlx-cache.
  static std::string default_dir();

  const std::string& dir() const { return dir_; }
  std::optional<std::string> get(std::string_view key) const;
  // Returns false (and leaves no partial file) when the directory cannot be written.
  bool put(std::string_view key, std::string_view bytes) const;
  bool erase(std::string_view key) const;

 private:
  std::string path_of(std::string_view key) const;
  std::string dir_;
};

}  // namespace rlx
