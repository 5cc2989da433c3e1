// Not a gtest: the last rank throws while rank 0 waits in an all_reduce that can never
// complete. abort_check.sh runs it under mpirun and checks that the whole job ends, with
// the error, within seconds. argv[1]: "guarded" (run_or_abort) or "uncaught" (the
// terminate handler that init() installs).
#include <cstdio>
#include <cstring>

#include "rlx/dist.h"
#include "rlx/rlx.h"

int main(int argc, char** argv) {
  const bool uncaught = argc > 1 && std::strcmp(argv[1], "uncaught") == 0;
  rlx::dist::ProcessGroup& pg = rlx::dist::init();
  pg.barrier();
  auto body = [&] {
    if (pg.rank() == pg.size() - 1)
      throw rlx::ValueError("[abort_test] deliberate failure on rank " + std::to_string(pg.rank()));
    // The other ranks block here: the last rank never joins.
    pg.all_reduce(rlx::Tensor::full(rlx::DType::f32, {4}, 1.0));
    std::printf("rank %d: the all_reduce returned, which it must not\n", pg.rank());
  };
  if (uncaught) {
    body();
    return 0;
  }
  return rlx::dist::run_or_abort(body);
}
