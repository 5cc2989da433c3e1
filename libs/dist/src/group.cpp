// The process group: started from an MPI launch, torchrun-style variables or nothing;
// abort on error; eager collectives (one-node graphs, so they share the ops' kernels).
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <iostream>

#include "internal.h"
#include "rlx/cuda.h"
#include "rlx/ops.h"
#include "rlx/session.h"
#include "store.h"

namespace rlx::dist {

namespace {

constexpr const char* kWhere = "dist";

std::unique_ptr<detail::World>& world_ptr() {
  static std::unique_ptr<detail::World> w;
  return w;
}

const char* env(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? v : nullptr;
}

int env_int(const char* name) {
  const char* v = env(name);
  if (!v) fail<ValueError>(kWhere, "expected the environment variable ", name, ", got none");
  char* end = nullptr;
  long x = std::strtol(v, &end, 10);
  if (*end != '\0' || x < 0 || x > (1 << 24))
    fail<ValueError>(kWhere, "expected ", name, " to be a non-negative integer, got '", v, "'");
  return int(x);
}

Launch detect() {
  // OpenMPI's mpirun sets OMPI_COMM_WORLD_SIZE; MPICH / PMIx launchers set PMI_SIZE.
  if (env("OMPI_COMM_WORLD_SIZE") || env("PMI_SIZE") || env("PMIX_RANK")) return Launch::mpi;
  if (env("RANK") && env("WORLD_SIZE")) return Launch::env;
  return Launch::single;
}

void check_mpi(int rc, const char* call) {
  if (rc == MPI_SUCCESS) return;
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  fail<DeviceError>(kWhere, call, " failed: ", std::string(msg, size_t(len)));
}

// An uncaught exception on one rank must not leave the others in a collective.
[[noreturn]] void on_terminate() {
  std::string what = "terminate called";
  if (auto e = std::current_exception()) try {
      std::rethrow_exception(e);
    } catch (const std::exception& x) {
      what = x.what();
    } catch (...) {
      what = "an unknown exception";
    }
  if (!initialized()) {  // after finalize(): nothing left to end but this process
    std::fprintf(stderr, "%s\n", what.c_str());
    std::abort();
  }
  world().abort(what, 1);
}

// One collective op run eagerly: a one-node graph compiled for x's device (the compile
// cache makes repeated calls cheap).
Tensor eager(const Tensor& x, const std::function<Value(Value)>& build) {
  Graph g("dist.eager");
  Value in = g.input("x", x.type());
  g.output(build(in), "y");
  CompiledGraph cg = Session(x.device()).compile(g);
  return cg.run({{"x", x}}).at("y");
}

}  // namespace

namespace detail {

World& world_state() {
  auto& w = world_ptr();
  if (!w) fail<ValueError>(kWhere, "expected rlx::dist::init() first, got no process group");
  return *w;
}

void broadcast_bytes(void* data, size_t n, int root) {
  World& w = world_state();
  if (w.pg->size() == 1) return;
  if (w.mpi) {
    check_mpi(MPI_Bcast(data, int(n), MPI_BYTE, root, MPI_COMM_WORLD), "MPI_Bcast");
  } else {
    if (root != 0) fail<NotSupported>(kWhere, "expected root 0 for the env rendezvous, got ", root);
    w.store->broadcast(data, n);
  }
}

const ProcessGroup& group_of(const Attrs& attrs, const std::string& op) {
  const ProcessGroup& pg = *world_state().pg;
  if (attrs.get_int("group") != pg.id())
    fail<ValueError>(op, "expected group ", pg.id(), " (the world), got ", attrs.get_int("group"));
  if (attrs.get_int("size") != pg.size())
    fail<ValueError>(op, "expected a graph built for this world of ", pg.size(),
                     " ranks, got one built for ", attrs.get_int("size"));
  return pg;
}

}  // namespace detail

const char* reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum:
      return "sum";
    case ReduceOp::mean:
      return "mean";
    case ReduceOp::max:
      return "max";
    case ReduceOp::min:
      return "min";
  }
  return "?";
}

Device local_device() {
  if (!cuda::available()) return Device::cpu();
  const char* local = env("OMPI_COMM_WORLD_LOCAL_RANK");
  if (!local) local = env("LOCAL_RANK");
  int r = local ? std::atoi(local) : world().rank();
  return Device::cuda(r % cuda::device_count());
}

bool initialized() { return world_ptr() != nullptr; }
ProcessGroup& world() { return *detail::world_state().pg; }

ProcessGroup& init(const InitOptions& options) {
  auto& w = world_ptr();
  if (w) {
    if (options.launch != Launch::automatic && options.launch != w->pg->launch())
      fail<ValueError>(kWhere, "expected init() again with the same launch, got another");
    return *w->pg;
  }
  register_ops();
  auto state = std::make_unique<detail::World>();
  state->options = options;
  Launch launch = options.launch == Launch::automatic ? detect() : options.launch;
  int rank = 0, size = 1;
  if (launch == Launch::mpi) {
    int provided = 0;
    check_mpi(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided),
              "MPI_Init_thread");
    state->mpi = true;
    // Errors come back as codes (typed exceptions here) rather than MPI's own abort.
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    check_mpi(MPI_Comm_rank(MPI_COMM_WORLD, &rank), "MPI_Comm_rank");
    check_mpi(MPI_Comm_size(MPI_COMM_WORLD, &size), "MPI_Comm_size");
  } else if (launch == Launch::env) {
    rank = env_int("RANK");
    size = env_int("WORLD_SIZE");
    if (size < 1 || rank >= size)
      fail<ValueError>(kWhere, "expected 0 <= RANK < WORLD_SIZE, got RANK=", rank,
                       " WORLD_SIZE=", size);
    if (size > 1) {
      const char* addr = env("MASTER_ADDR");
      if (!addr) fail<ValueError>(kWhere, "expected MASTER_ADDR for WORLD_SIZE > 1, got none");
      int port = env_int("MASTER_PORT");
      if (port < 1 || port > 65535)
        fail<ValueError>(kWhere, "expected MASTER_PORT in [1, 65535], got ", port);
      state->store =
          std::make_unique<detail::Store>(addr, port, rank, size, options.rendezvous_timeout_s);
    }
  }
  state->pg = std::make_unique<ProcessGroup>(rank, size, launch);
  w = std::move(state);
  std::set_terminate(on_terminate);
  std::atexit(finalize);
  return *w->pg;
}

void finalize() {
  auto& w = world_ptr();
  if (!w) return;
  if (w->mpi) {
    int done = 0;
    MPI_Finalized(&done);
    if (!done) MPI_Finalize();
  }
  w.reset();
}

void ProcessGroup::abort(const std::string& message, int code) const {
  std::fprintf(stderr, "[rank %d] %s\n", rank_, message.c_str());
  std::fflush(stderr);
  auto& w = world_ptr();
  if (w && w->mpi && size_ > 1) MPI_Abort(MPI_COMM_WORLD, code);  // mpirun ends the others
  std::_Exit(code);
}

int run_or_abort(const std::function<void()>& fn) {
  try {
    fn();
    return 0;
  } catch (const std::exception& e) {
    if (!initialized()) throw;
    world().abort(e.what(), 1);
  }
}

Tensor ProcessGroup::all_reduce(const Tensor& x, ReduceOp op) const {
  return eager(x, [&](Value v) { return dist::all_reduce(v, op); });
}
Tensor ProcessGroup::broadcast(const Tensor& x, int root) const {
  return eager(x, [&](Value v) { return dist::broadcast(v, root); });
}
Tensor ProcessGroup::all_gather(const Tensor& x, int64_t axis) const {
  return eager(x, [&](Value v) { return dist::all_gather(v, axis); });
}
Tensor ProcessGroup::reduce_scatter(const Tensor& x, ReduceOp op, int64_t axis) const {
  return eager(x, [&](Value v) { return dist::reduce_scatter(v, op, axis); });
}

void ProcessGroup::barrier() const {
  detail::World& w = detail::world_state();
  if (size_ == 1) return;
  std::lock_guard lock(w.mu);
  if (w.mpi)
    check_mpi(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
  else
    w.store->barrier();
}

}  // namespace rlx::dist
