// ONNX-only elementwise ops and their CPU kernels.
#include "frontend/onnx/ops/elementwise.h"

#include <cstdint>
#include <mutex>
#include <type_traits>

#include "rlx/kernel.h"
#include "rlx/op.h"
#include "rlx/rules.h"

namespace rlx::onnx_import {

namespace {

// NumPy broadcasting of two shapes; a symbolic dim against a static one other than 1
// takes the static size (they must agree at run time).
Shape broadcast(const InferContext& ctx, const Shape& a, const Shape& b) {
  size_t rank = std::max(a.size(), b.size());
  Shape out(rank);
  for (size_t i = 0; i < rank; ++i) {
    Dim da = i < rank - a.size() ? Dim(1) : a[i - (rank - a.size())];
    Dim db = i < rank - b.size() ? Dim(1) : b[i - (rank - b.size())];
    if (da.is(1) || da == db)
      out[i] = db;
    else if (db.is(1))
      out[i] = da;
    else if (da.is_static() && db.is_static())
      ctx.fail("expected broadcastable shapes, got ", shape_str(a), " and ", shape_str(b));
    else
      out[i] = da.is_static() ? da : db.is_static() ? db : Dim::unknown();
  }
  return out;
}

std::vector<TensorType> infer_bit_shift(const InferContext& ctx) {
  DType t = ctx.dtype(0);
  if (!is_integer(t)) ctx.fail_type("expected an integer dtype, got ", dtype_name(t));
  if (ctx.dtype(1) != t)
    ctx.fail_type("expected the shift of dtype ", dtype_name(t), ", got ",
                  dtype_name(ctx.dtype(1)));
  return {{t, broadcast(ctx, ctx.shape(0), ctx.shape(1))}};
}

template <class T>
void shift_loop(const Tensor& x, const Tensor& y, Tensor& out, bool left) {
  using U = std::make_unsigned_t<T>;
  constexpr U bits = U(sizeof(T) * 8);
  const T* px = x.data_as<T>();
  const T* py = y.data_as<T>();
  T* po = out.data_as<T>();
  for (int64_t i = 0, n = out.numel(); i < n; ++i) {
    U v = U(px[i]), s = U(py[i]);
    po[i] = T(s >= bits ? U(0) : left ? U(v << s) : U(v >> s));
  }
}

void bit_shift_kernel(const KernelContext& ctx, std::span<const Tensor> in, std::span<Tensor> out) {
  const std::vector<int64_t>& shape = out[0].shape();
  Tensor x = in[0].broadcast_to(shape).contiguous();
  Tensor y = in[1].broadcast_to(shape).contiguous();
  bool left = ctx.attrs.get_string("direction") == "left";
  switch (x.dtype()) {
    case DType::u8:
      return shift_loop<uint8_t>(x, y, out[0], left);
    case DType::i8:
      return shift_loop<int8_t>(x, y, out[0], left);
    case DType::i16:
      return shift_loop<int16_t>(x, y, out[0], left);
    case DType::i32:
      return shift_loop<int32_t>(x, y, out[0], left);
    case DType::i64:
      return shift_loop<int64_t>(x, y, out[0], left);
    default:
      fail<TypeError>(ctx.op.name, "expected an integer dtype, got ", dtype_name(x.dtype()));
  }
}

}  // namespace

void register_elementwise_onnx_ops() {
  static std::once_flag once;
  std::call_once(once, [] {
    OpDef d;
    d.name = "onnx.bit_shift";
    d.traits = Trait::elementwise | Trait::nondifferentiable;
    d.arity(2).attr("direction", AttrKind::String, std::nullopt, {"left", "right"});
    d.doc = "x shifted left or right by y bits (unsigned bit patterns; >= width gives 0).";
    d.infer = infer_bit_shift;
    d.vmap = rules::vmap_elementwise;
    OpRegistry::global().add(std::move(d));
    KernelRegistry::global().add("onnx.bit_shift", DeviceKind::cpu, bit_shift_kernel);
  });
}

}  // namespace rlx::onnx_import
