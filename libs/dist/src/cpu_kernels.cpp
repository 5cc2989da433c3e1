// CPU kernels of the dist.* ops, through MPI (MPI_COMM_WORLD). A world of one rank copies;
// an env launch (no MPI) of more ranks has no CPU transport: NotSupported.
#include <mpi.h>

#include <climits>
#include <cstring>

#include "internal.h"
#include "rlx/kernel.h"

namespace rlx::dist::detail {

namespace {

using In = std::span<const Tensor>;
using Out = std::span<Tensor>;

void check(int rc, const std::string& op, const char* call) {
  if (rc == MPI_SUCCESS) return;
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  fail<DeviceError>(op, call, " failed: ", std::string(msg, size_t(len)));
}

MPI_Datatype mpi_type(DType d) {
  switch (d) {
    case DType::f32:
      return MPI_FLOAT;
    case DType::f64:
      return MPI_DOUBLE;
    case DType::i8:
      return MPI_INT8_T;
    case DType::i16:
      return MPI_INT16_T;
    case DType::i32:
      return MPI_INT32_T;
    case DType::i64:
      return MPI_INT64_T;
    case DType::u8:
      return MPI_UINT8_T;
    default:
      return MPI_DATATYPE_NULL;  // f16 / bf16 / bool: MPI cannot add them
  }
}

MPI_Op mpi_op(ReduceOp o) {
  switch (o) {
    case ReduceOp::max:
      return MPI_MAX;
    case ReduceOp::min:
      return MPI_MIN;
    default:
      return MPI_SUM;
  }
}

int count_of(const Tensor& t, const std::string& op) {
  if (t.numel() > INT_MAX)
    fail<NotSupported>(op, "expected at most ", INT_MAX, " elements per MPI call, got ", t.numel());
  return int(t.numel());
}

int bytes_of(const Tensor& t, const std::string& op) {
  if (t.nbytes() > size_t(INT_MAX))
    fail<NotSupported>(op, "expected at most ", INT_MAX, " bytes per MPI call, got ", t.nbytes());
  return int(t.nbytes());
}

void copy(const Tensor& from, const Tensor& to) {
  if (from.data() != to.data() && from.nbytes() > 0)
    std::memcpy(to.data(), from.data(), from.nbytes());
}

// The group, MPI checked: nullptr when the world is one rank (the kernel copies).
const ProcessGroup* mpi_group(const KernelContext& ctx) {
  const ProcessGroup& pg = group_of(ctx.attrs, ctx.op.name);
  if (pg.size() == 1) return nullptr;
  if (!world_state().mpi)
    fail<NotSupported>(ctx.op.name,
                       "expected CUDA tensors (NCCL) under a torchrun-style launch of ", pg.size(),
                       " ranks, got CPU tensors: CPU collectives need an MPI launch (mpirun)");
  return &pg;
}

void scale_mean(const Tensor& t, int size) {
  if (t.dtype() == DType::f32)
    for (float *p = t.data_as<float>(), *e = p + t.numel(); p < e; ++p) *p /= float(size);
  else
    for (double *p = t.data_as<double>(), *e = p + t.numel(); p < e; ++p) *p /= double(size);
}

bool reducible(const KernelQuery& q) { return mpi_type(q.inputs[0].dtype) != MPI_DATATYPE_NULL; }

void all_reduce(const KernelContext& ctx, In in, Out out) {
  copy(in[0], out[0]);
  const ProcessGroup* pg = mpi_group(ctx);
  if (!pg) return;
  ReduceOp o = reduce_op_of(ctx.attrs);
  {
    std::lock_guard lock(world_state().mu);
    check(MPI_Allreduce(MPI_IN_PLACE, out[0].data(), count_of(out[0], ctx.op.name),
                        mpi_type(out[0].dtype()), mpi_op(o), MPI_COMM_WORLD),
          ctx.op.name, "MPI_Allreduce");
  }
  if (o == ReduceOp::mean) scale_mean(out[0], pg->size());
}

void broadcast(const KernelContext& ctx, In in, Out out) {
  copy(in[0], out[0]);
  if (!mpi_group(ctx)) return;
  std::lock_guard lock(world_state().mu);
  check(MPI_Bcast(out[0].data(), bytes_of(out[0], ctx.op.name), MPI_BYTE,
                  int(ctx.attrs.get_int("root")), MPI_COMM_WORLD),
        ctx.op.name, "MPI_Bcast");
}

void reduce(const KernelContext& ctx, In in, Out out) {
  const ProcessGroup* pg = mpi_group(ctx);
  if (!pg) return copy(in[0], out[0]);
  int root = int(ctx.attrs.get_int("root"));
  std::lock_guard lock(world_state().mu);
  check(MPI_Reduce(in[0].data(), out[0].data(), count_of(in[0], ctx.op.name),
                   mpi_type(in[0].dtype()), MPI_SUM, root, MPI_COMM_WORLD),
        ctx.op.name, "MPI_Reduce");
  if (pg->rank() != root) std::memset(out[0].data(), 0, out[0].nbytes());
}

// all_gather / reduce_scatter: an output of unknown size (a symbolic axis 0 at build
// time) arrives undefined; its size is known now.
Tensor& output_scaled(Out out, const Tensor& in, int64_t num, int64_t den) {
  if (!out[0].defined()) {
    std::vector<int64_t> s = in.shape();
    s[0] = s[0] * num / den;
    out[0] = Tensor::empty(in.dtype(), s);
  }
  return out[0];
}

void all_gather(const KernelContext& ctx, In in, Out out) {
  const ProcessGroup* pg = mpi_group(ctx);
  Tensor& y = output_scaled(out, in[0], pg ? pg->size() : 1, 1);
  if (!pg) return copy(in[0], y);
  std::lock_guard lock(world_state().mu);
  check(MPI_Allgather(in[0].data(), bytes_of(in[0], ctx.op.name), MPI_BYTE, y.data(),
                      bytes_of(in[0], ctx.op.name), MPI_BYTE, MPI_COMM_WORLD),
        ctx.op.name, "MPI_Allgather");
}

void reduce_scatter(const KernelContext& ctx, In in, Out out) {
  const ProcessGroup* pg = mpi_group(ctx);
  if (!pg) return copy(in[0], output_scaled(out, in[0], 1, 1));
  if (in[0].shape()[0] % pg->size() != 0)
    fail<ValueError>(ctx.op.name, "expected axis 0 divisible by the ", pg->size(),
                     " ranks, got shape ", ints_str(in[0].shape()));
  Tensor& y = output_scaled(out, in[0], 1, pg->size());
  ReduceOp o = reduce_op_of(ctx.attrs);
  {
    std::lock_guard lock(world_state().mu);
    check(MPI_Reduce_scatter_block(in[0].data(), y.data(), count_of(y, ctx.op.name),
                                   mpi_type(in[0].dtype()), mpi_op(o), MPI_COMM_WORLD),
          ctx.op.name, "MPI_Reduce_scatter_block");
  }
  if (o == ReduceOp::mean) scale_mean(y, pg->size());
}

// Any launch: the barrier of the process group (MPI, or the env rendezvous).
void barrier(const KernelContext& ctx, In in, Out out) {
  group_of(ctx.attrs, ctx.op.name).barrier();
  copy(in[0], out[0]);
}

}  // namespace

void register_cpu_kernels() {
  auto& k = KernelRegistry::global();
  KernelFlags inplace;
  inplace.inplace = true;
  k.add("dist.all_reduce", DeviceKind::cpu, all_reduce, reducible, inplace);
  k.add("dist.broadcast", DeviceKind::cpu, broadcast, {}, inplace);
  k.add("dist.reduce", DeviceKind::cpu, reduce, reducible);
  k.add("dist.all_gather", DeviceKind::cpu, all_gather);
  k.add("dist.reduce_scatter", DeviceKind::cpu, reduce_scatter, reducible);
  k.add("dist.barrier", DeviceKind::cpu, barrier, {}, inplace);
}

}  // namespace rlx::dist::detail
