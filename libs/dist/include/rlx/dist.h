// rlx::dist — data-parallel training across processes: a process group started by an MPI
// launch (`mpirun -np N`) or by torchrun-style environment variables (RANK, WORLD_SIZE,
// MASTER_ADDR, MASTER_PORT), and collectives as graph ops (dist.all_reduce, dist.broadcast,
// dist.reduce, dist.all_gather, dist.reduce_scatter, dist.barrier) with kernels through MPI
// for CPU tensors and through NCCL for CUDA tensors.
//
//   rlx::dist::ProcessGroup& pg = rlx::dist::init();   // after main() starts
//   return rlx::dist::run_or_abort([&] {               // an error on one rank ends them all
//     rlx::train::TrainerOptions opts;
//     rlx::dist::data_parallel(opts, pg);              // gradients all-reduced in the step
//     rlx::train::Trainer t(model, opts);
//     ... set_param ...
//     rlx::dist::broadcast_params(t, pg);              // every rank starts from rank 0's
//     rlx::dist::DistributedSampler shard(n, pg);      // this rank's rows of the data
//   });
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "rlx/graph.h"
#include "rlx/tensor.h"
#include "rlx/train.h"

namespace rlx::dist {

// How the processes were started. `single`: no launcher (one process, collectives are
// identities); `mpi`: mpirun (MPI for CPU tensors, NCCL's id sent over MPI); `env`: the
// RANK / WORLD_SIZE / MASTER_ADDR / MASTER_PORT variables (a TCP rendezvous at rank 0's
// MASTER_ADDR:MASTER_PORT for NCCL's id and barriers; CPU tensor collectives need an MPI
// launch and are NotSupported here when WORLD_SIZE > 1).
enum class Launch { automatic, single, mpi, env };

enum class ReduceOp { sum, mean, max, min };
const char* reduce_op_name(ReduceOp op);

struct InitOptions {
  Launch launch = Launch::automatic;  // automatic: mpi under mpirun, else env when RANK
                                      // and WORLD_SIZE are set, else single
  double rendezvous_timeout_s = 120;  // env: how long to wait for the other ranks
};

// The world's processes. Collectives on it are graph ops (the builders below); the
// methods here run one such op eagerly on a tensor (its device decides MPI or NCCL).
class ProcessGroup {
 public:
  int rank() const { return rank_; }
  int size() const { return size_; }
  Launch launch() const { return launch_; }
  int id() const { return 0; }  // the "group" attribute of the collective ops

  Tensor all_reduce(const Tensor& x, ReduceOp op = ReduceOp::sum) const;
  Tensor broadcast(const Tensor& x, int root = 0) const;
  Tensor all_gather(const Tensor& x, int64_t axis = 0) const;
  Tensor reduce_scatter(const Tensor& x, ReduceOp op = ReduceOp::sum, int64_t axis = 0) const;
  void barrier() const;
  // Ends every rank of the job: prints "[rank r] message" to stderr and aborts the MPI
  // job (MPI_Abort), or exits this process with `code` (env: the launcher ends the rest).
  [[noreturn]] void abort(const std::string& message, int code = 1) const;

  ProcessGroup(int rank, int size, Launch launch) : rank_(rank), size_(size), launch_(launch) {}

 private:
  int rank_, size_;
  Launch launch_;
};

// Starts the process group once (later calls return it; differing options are a
// ValueError). Registers the dist.* ops and their kernels. Installs a terminate handler
// that aborts the whole job, so an uncaught exception on one rank never leaves the
// others waiting in a collective. Errors: ValueError (bad or missing variables),
// IoError (rendezvous), DeviceError (MPI).
ProcessGroup& init(const InitOptions& options = {});
bool initialized();
ProcessGroup& world();  // ValueError before init()
// This rank's device: the GPU of its local rank (OMPI_COMM_WORLD_LOCAL_RANK or
// LOCAL_RANK, else the rank) modulo the GPUs present, or the CPU when there is none.
Device local_device();
// Optional at exit (MPI_Finalize after a barrier); init() registers it with atexit.
void finalize();

// Runs fn; an exception ends every rank (ProcessGroup::abort with its message) instead of
// leaving them in a collective. Returns fn's exit code (0 for a void fn).
int run_or_abort(const std::function<void()>& fn);

// Registers the ops and CPU (and, in CUDA builds with NCCL, CUDA) kernels. init() does
// it; a graph that only builds or prints dist ops may call it alone.
void register_ops();

// ---- graph builders (each needs init() for the group's size) ----------------------------

// Reduces x over the ranks; every rank gets the result. vjp: all_reduce of the cotangent.
Value all_reduce(Value x, ReduceOp op = ReduceOp::sum);
// Rank root's x on every rank. vjp: the cotangents reduced (summed) onto root.
Value broadcast(Value x, int root = 0);
// The sum over ranks on root, zeros elsewhere. vjp: broadcast from root.
Value reduce(Value x, int root = 0);
// The ranks' x concatenated along axis (rank order). vjp: reduce_scatter(sum).
Value all_gather(Value x, int64_t axis = 0);
// x reduced over the ranks, then split in size() chunks along axis; rank r keeps chunk r
// (axis must divide evenly). vjp (sum): all_gather.
Value reduce_scatter(Value x, ReduceOp op = ReduceOp::sum, int64_t axis = 0);
// x, once every rank has reached this point.
Value barrier(Value x);

// ---- data-parallel training -------------------------------------------------------------

struct DataParallelOptions {
  // Gradients are flattened into buckets of about this many bytes, one all_reduce each
  // (fewer, larger messages). Buckets are filled from the last param to the first, the
  // order in which the backward pass produces them.
  size_t bucket_bytes = size_t(25) << 20;
  ReduceOp op = ReduceOp::mean;  // mean: each rank's loss is a mean over its shard
};

// Makes `options` a data-parallel Trainer's: the train step all-reduces the gradients
// (in buckets, inside the compiled step, before clipping, so the clipping norm and the
// update are the same on every rank), and only rank 0 writes checkpoints.
void data_parallel(train::TrainerOptions& options, const ProcessGroup& pg,
                   const DataParallelOptions& dp = {});
// Sets every model param of the trainer to root's value.
void broadcast_params(train::Trainer& trainer, const ProcessGroup& pg, int root = 0);

// torch.utils.data.DistributedSampler: the dataset's indices (shuffled by seed + epoch,
// the same permutation on every rank), padded by wrapping around to a multiple of
// size() (or cut to one with drop_last), and every size()-th of them from rank().
class DistributedSampler {
 public:
  DistributedSampler(int64_t dataset_size, const ProcessGroup& pg, bool shuffle = true,
                     uint64_t seed = 0, bool drop_last = false);
  void set_epoch(int64_t epoch) { epoch_ = epoch; }
  std::vector<int64_t> indices() const;
  int64_t num_samples() const;  // per rank

 private:
  int64_t n_;
  int rank_, size_;
  bool shuffle_, drop_last_;
  uint64_t seed_;
  int64_t epoch_ = 0;
};

}  // namespace rlx::dist
