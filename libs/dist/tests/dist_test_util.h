// Helpers of the dist tests: a main that starts the process group, and one-graph runs.
#pragma once

#include <gtest/gtest.h>

#include <functional>

#include "rlx/dist.h"
#include "rlx/rlx.h"

namespace dist_test {

// Builds a graph of one input "x" and one output, compiles it for x's device, runs it.
inline rlx::Tensor run1(const rlx::Tensor& x, const std::function<rlx::Value(rlx::Value)>& f) {
  rlx::Graph g("t");
  g.output(f(g.input("x", x.type())), "y");
  return rlx::Session(x.device()).compile(g).run({{"x", x}}).at("y");
}

}  // namespace dist_test

// Every rank runs every test (mpirun --tag-output prefixes each line with its rank). A
// failure on any rank aborts the whole job, non-zero, rather than leaving the other ranks
// waiting in the next collective.
#define RLX_DIST_TEST_MAIN()                                                         \
  int main(int argc, char** argv) {                                                  \
    ::testing::InitGoogleTest(&argc, argv);                                          \
    rlx::dist::init();                                                               \
    return rlx::dist::run_or_abort([] {                                              \
      if (RUN_ALL_TESTS() != 0) throw rlx::ValueError("a test failed on this rank"); \
    });                                                                              \
  }
