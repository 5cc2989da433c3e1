// CUDA kernels of the dist.* ops, through NCCL on the device's stream
// (KernelContext::stream): one communicator per device, created on the first collective
// (every rank reaches it in the same order), its unique id sent from rank 0 over MPI or
// the env rendezvous. dist.barrier has no CUDA kernel: it takes the host path.
// Without NCCL (RLX_DIST_NCCL undefined) this file registers nothing.
#include "internal.h"

#ifdef RLX_DIST_NCCL

#include <cuda_runtime.h>
#include <nccl.h>

#include <map>

#include "rlx/kernel.h"

namespace rlx::dist::detail {

namespace {

using In = std::span<const Tensor>;
using Out = std::span<Tensor>;

void check(ncclResult_t r, const std::string& op, const char* call) {
  if (r != ncclSuccess)
    fail<DeviceError>(op, call, " failed: ", ncclGetErrorString(r), " (", ncclGetLastError(nullptr),
                      ")");
}

void check(cudaError_t e, const std::string& op, const char* call) {
  if (e != cudaSuccess) fail<DeviceError>(op, call, " failed: ", cudaGetErrorString(e));
}

bool nccl_type(DType d, ncclDataType_t* out) {
  switch (d) {
    case DType::f32:
      *out = ncclFloat32;
      return true;
    case DType::f64:
      *out = ncclFloat64;
      return true;
    case DType::f16:
      *out = ncclFloat16;
      return true;
    case DType::bf16:
      *out = ncclBfloat16;
      return true;
    case DType::i8:
      *out = ncclInt8;
      return true;
    case DType::u8:
      *out = ncclUint8;
      return true;
    case DType::i32:
      *out = ncclInt32;
      return true;
    case DType::i64:
      *out = ncclInt64;
      return true;
    default:
      return false;
  }
}

ncclDataType_t type_of(const Tensor& t) {
  ncclDataType_t d{};
  nccl_type(t.dtype(), &d);
  return d;
}

ncclRedOp_t nccl_op(ReduceOp o) {
  switch (o) {
    case ReduceOp::mean:
      return ncclAvg;
    case ReduceOp::max:
      return ncclMax;
    case ReduceOp::min:
      return ncclMin;
    default:
      return ncclSum;
  }
}

// device index -> communicator. Guarded by World::mu (which also orders the MPI_Bcast of
// the id against other MPI calls).
std::map<int, ncclComm_t>& comms() {
  static std::map<int, ncclComm_t> m;
  return m;
}

ncclComm_t comm_for(const KernelContext& ctx) {
  const ProcessGroup& pg = group_of(ctx.attrs, ctx.op.name);
  int dev = ctx.device.index;
  auto& m = comms();
  if (auto it = m.find(dev); it != m.end()) return it->second;
  ncclUniqueId id{};
  if (pg.rank() == 0) check(ncclGetUniqueId(&id), ctx.op.name, "ncclGetUniqueId");
  broadcast_bytes(&id, sizeof id, 0);
  int prev = 0;
  check(cudaGetDevice(&prev), ctx.op.name, "cudaGetDevice");
  check(cudaSetDevice(dev), ctx.op.name, "cudaSetDevice");
  ncclComm_t c = nullptr;
  ncclResult_t r = ncclCommInitRank(&c, pg.size(), id, pg.rank());
  cudaSetDevice(prev);
  check(r, ctx.op.name, "ncclCommInitRank");
  m[dev] = c;
  return c;
}

cudaStream_t stream(const KernelContext& ctx) { return static_cast<cudaStream_t>(ctx.stream); }

bool supported(const KernelQuery& q) {
  ncclDataType_t d;
  return nccl_type(q.inputs[0].dtype, &d);
}

Tensor& output_scaled(const KernelContext& ctx, Out out, const Tensor& in, int64_t num,
                      int64_t den) {
  if (!out[0].defined()) {
    std::vector<int64_t> s = in.shape();
    s[0] = s[0] * num / den;
    out[0] = Tensor::empty(in.dtype(), s, ctx.device);
  }
  return out[0];
}

void all_reduce(const KernelContext& ctx, In in, Out out) {
  ncclComm_t c = comm_for(ctx);
  check(ncclAllReduce(in[0].data(), out[0].data(), size_t(in[0].numel()), type_of(in[0]),
                      nccl_op(reduce_op_of(ctx.attrs)), c, stream(ctx)),
        ctx.op.name, "ncclAllReduce");
}

void broadcast(const KernelContext& ctx, In in, Out out) {
  ncclComm_t c = comm_for(ctx);
  check(ncclBroadcast(in[0].data(), out[0].data(), size_t(in[0].numel()), type_of(in[0]),
                      int(ctx.attrs.get_int("root")), c, stream(ctx)),
        ctx.op.name, "ncclBroadcast");
}

void reduce(const KernelContext& ctx, In in, Out out) {
  ncclComm_t c = comm_for(ctx);
  int root = int(ctx.attrs.get_int("root"));
  check(ncclReduce(in[0].data(), out[0].data(), size_t(in[0].numel()), type_of(in[0]), ncclSum,
                   root, c, stream(ctx)),
        ctx.op.name, "ncclReduce");
  if (group_of(ctx.attrs, ctx.op.name).rank() != root)
    check(cudaMemsetAsync(out[0].data(), 0, out[0].nbytes(), stream(ctx)), ctx.op.name,
          "cudaMemsetAsync");
}

void all_gather(const KernelContext& ctx, In in, Out out) {
  ncclComm_t c = comm_for(ctx);
  const ProcessGroup& pg = group_of(ctx.attrs, ctx.op.name);
  Tensor& y = output_scaled(ctx, out, in[0], pg.size(), 1);
  check(
      ncclAllGather(in[0].data(), y.data(), size_t(in[0].numel()), type_of(in[0]), c, stream(ctx)),
      ctx.op.name, "ncclAllGather");
}

void reduce_scatter(const KernelContext& ctx, In in, Out out) {
  ncclComm_t c = comm_for(ctx);
  const ProcessGroup& pg = group_of(ctx.attrs, ctx.op.name);
  if (in[0].shape()[0] % pg.size() != 0)
    fail<ValueError>(ctx.op.name, "expected axis 0 divisible by the ", pg.size(),
                     " ranks, got shape ", ints_str(in[0].shape()));
  Tensor& y = output_scaled(ctx, out, in[0], 1, pg.size());
  check(ncclReduceScatter(in[0].data(), y.data(), size_t(y.numel()), type_of(in[0]),
                          nccl_op(reduce_op_of(ctx.attrs)), c, stream(ctx)),
        ctx.op.name, "ncclReduceScatter");
}

// Kernels run with World::mu held: NCCL calls from two threads at once would interleave
// the ranks' collectives differently.
KernelFn locked(void (*fn)(const KernelContext&, In, Out)) {
  return [fn](const KernelContext& ctx, In in, Out out) {
    std::lock_guard lock(world_state().mu);
    fn(ctx, in, out);
  };
}

}  // namespace

void register_nccl_kernels() {
  auto& k = KernelRegistry::global();
  k.add("dist.all_reduce", DeviceKind::cuda, locked(all_reduce), supported);
  k.add("dist.broadcast", DeviceKind::cuda, locked(broadcast), supported);
  k.add("dist.reduce", DeviceKind::cuda, locked(reduce), supported);
  k.add("dist.all_gather", DeviceKind::cuda, locked(all_gather), supported);
  k.add("dist.reduce_scatter", DeviceKind::cuda, locked(reduce_scatter), supported);
}

}  // namespace rlx::dist::detail

#else

namespace rlx::dist::detail {
void register_nccl_kernels() {}
}  // namespace rlx::dist::detail

#endif
