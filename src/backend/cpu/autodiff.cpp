// CPU kernels of the autodiff helper ops (src/ops/autodiff.cpp). All are views of their
// first input: nothing is copied.
#include "backend/cpu/cpu_util.h"
#include "backend/cpu/families.h"
#include "backend/cpu/isa.h"

namespace rlx::cpu {
inline namespace RLX_ISA_NS {

namespace {

using Ins = std::span<const Tensor>;
using Outs = std::span<Tensor>;

void reshape_like_kernel(const KernelContext& ctx, Ins in, Outs out) {
  out[0] = in[0].reshape(ctx.output_shapes[0]);
}

// A stride-0 view; consumers that need contiguous inputs get a copy from the runtime.
void broadcast_like_kernel(const KernelContext& ctx, Ins in, Outs out) {
  out[0] = in[0].broadcast_to(ctx.output_shapes[0]);
}

void identity_kernel(const KernelContext&, Ins in, Outs out) { out[0] = in[0]; }

}  // namespace

void register_autodiff(KernelRegistry& r) {
  const KernelFlags views{.strided_inputs = true, .makes_outputs = true, .any_device = true};
  add_kernel(r, "reshape_like", reshape_like_kernel, {},
             {.makes_outputs = true, .any_device = true});
  add_kernel(r, "broadcast_like", broadcast_like_kernel, {}, views);
  add_kernel(r, "stop_gradient", identity_kernel, {}, views);
  add_kernel(r, "checkpoint", identity_kernel, {}, views);
}

}  // namespace RLX_ISA_NS
}  // namespace rlx::cpu
