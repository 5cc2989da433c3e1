// One libFuzzer binary per target: RLX_FUZZ_TARGET names its entry (fuzz/CMakeLists.txt).
#include <cstdio>
#include <cstdlib>

#include "fuzz/entries.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const rlx::fuzz::Entry entry = [] {
    rlx::fuzz::Entry e = rlx::fuzz::find(RLX_FUZZ_TARGET);
    if (!e) {
      std::fprintf(stderr, "no fuzz target '%s'\n", RLX_FUZZ_TARGET);
      std::abort();
    }
    return e;
  }();
  entry({data, size});
  return 0;
}
