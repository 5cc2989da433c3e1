// The complex family's kernels (ops/complex.cpp) for operands of the output's shape:
// complex(re, im), real, imag, conj, angle, and abs of complex numbers (the modulus as the
// CPU computes it: c64 squares in double, c128 hypot). These are what the complex decompositions
// (sum / mean by parts, products from real GEMMs, stft) emit around their real ops, so a
// GPU graph keeps its complex values on the device; broadcasting complex(re, im) runs on
// the host (the CPU kernel, with its broadcasting).
#include "backend/cuda/cuda_util.h"
#include "backend/cuda/elementwise_ops.cuh"
#include "backend/cuda/families.h"
#include "backend/cuda/kernels.cuh"

namespace rlx::cuda {

namespace {

enum class Part { complex, real, imag, conj, angle, modulus };

template <class R, Part kPart>
__global__ void part_kernel(const void* a, const void* b, void* y, int64_t n) {
  using C = ewop::Cx<R>;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    if constexpr (kPart == Part::complex) {
      static_cast<C*>(y)[i] = C{static_cast<const R*>(a)[i], static_cast<const R*>(b)[i]};
    } else {
      const C z = static_cast<const C*>(a)[i];
      if constexpr (kPart == Part::real) static_cast<R*>(y)[i] = z.re;
      if constexpr (kPart == Part::imag) static_cast<R*>(y)[i] = z.im;
      if constexpr (kPart == Part::conj) static_cast<C*>(y)[i] = C{z.re, -z.im};
      if constexpr (kPart == Part::angle) static_cast<R*>(y)[i] = atan2(z.im, z.re);
      if constexpr (kPart == Part::modulus) {
        if constexpr (std::is_same_v<R, float>)
          static_cast<R*>(y)[i] = float(sqrt(double(z.re) * z.re + double(z.im) * z.im));
        else
          static_cast<R*>(y)[i] = hypot(z.re, z.im);
      }
    }
  }
}

template <Part kPart>
void kernel(const KernelContext& ctx, std::span<const Tensor> in, std::span<Tensor> out) {
  const int64_t n = out[0].numel();
  if (n == 0) return;
  const bool dbl = out[0].dtype() == DType::f64 || out[0].dtype() == DType::c128;
  const void* b = in.size() > 1 ? in[1].data() : nullptr;
  const int blocks = blocks_for(n);
  if (dbl)
    part_kernel<double, kPart>
        <<<blocks, kThreads, 0, stream_of(ctx)>>>(in[0].data(), b, out[0].data(), n);
  else
    part_kernel<float, kPart>
        <<<blocks, kThreads, 0, stream_of(ctx)>>>(in[0].data(), b, out[0].data(), n);
  RLX_CUDA_LAUNCHED(ctx.op.name.c_str());
}

// Every operand of the output's shape (no broadcasting) and in c64 / c128 or f32 / f64.
bool same_shapes(const KernelQuery& q) {
  for (const TensorType& t : q.inputs) {
    if (t.shape != q.outputs[0].shape) return false;
    if (!is_complex(t.dtype) && t.dtype != DType::f32 && t.dtype != DType::f64) return false;
  }
  return true;
}

// angle and abs: these of a real x are other kernels' (the CPU's; the elementwise table's).
bool complex_same_shapes(const KernelQuery& q) {
  return is_complex(q.inputs[0].dtype) && same_shapes(q);
}

}  // namespace

void register_complex(KernelRegistry& r) {
  add_kernel(r, "complex", kernel<Part::complex>, same_shapes);
  add_kernel(r, "real", kernel<Part::real>, same_shapes);
  add_kernel(r, "imag", kernel<Part::imag>, same_shapes);
  add_kernel(r, "conj", kernel<Part::conj>, same_shapes);
  add_kernel(r, "angle", kernel<Part::angle>, complex_same_shapes);
  // After the elementwise table's abs, which takes real numbers.
  add_kernel(r, "abs", kernel<Part::modulus>, complex_same_shapes);
}

}  // namespace rlx::cuda
