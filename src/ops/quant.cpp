// Ops on weights in storage form (block-quantized, f16, bf16, f32; rlx/quant.h):
//   dequantize(w [, rows]) — the values as f32 / f64 / f16 / bf16; with integer `rows`,
//     only those rows of w [V, k] (an embedding lookup into a quantized table);
//   quant_matmul(x [..., k], w [n, k] [, c]) = x @ w^T (+ c) with w never decoded as a
//     whole; c (a residual stream or a bias) broadcasts onto the product without growing
//     it: matmul_fusion folds a following add into it where a device's kernel adds c as
//     it stores each product (a decode step's residual adds cost no kernel of their own).
//   fused_quant_matmul(x, [scale], w, [c]) = swiglu(quant_matmul(rms_norm(x), w)) + c, each
//     part optional: an LLM block's norm, product, gate and residual as matmul_fusion
//     folds them where a device runs them as one kernel.
// quant_matmul decomposes into dequantize + dot_general, which is how a device without a
// kernel runs it; its rules differentiate and batch through x only (a quantized weight is
// a constant: it has no tangent).
#include "rlx/quant.h"

#include "ops/families.h"
#include "ops/fused.h"
#include "ops/infer_util.h"
#include "rlx/rules.h"

namespace rlx::detail {

namespace {

using Types = std::vector<TensorType>;
using Values = std::vector<Value>;

// Weights in a storage form the kernels read.
bool storage_dtype(DType t) {
  return is_quantized(t) || t == DType::f32 || t == DType::f16 || t == DType::bf16;
}

void expect_weights(const InferContext& ctx, size_t i) {
  expect_dtype(ctx, i, storage_dtype(ctx.dtype(i)), "a quantized, f32, f16 or bf16 dtype");
}

// The last dim of input i must fill whole blocks of its dtype.
void expect_whole_blocks(const InferContext& ctx, size_t i, const Dim& k) {
  DType t = ctx.dtype(i);
  if (!is_quantized(t) || !k.is_static() || k.value() % dtype_block(t) == 0) return;
  ctx.fail("expected the last dim (k = ", k.value(), ") a multiple of ", dtype_name(t),
           "'s block of ", dtype_block(t), " values, got ", ctx.input(i).str());
}

// ---- dequantize ------------------------------------------------------------------------

Types infer_dequantize(const InferContext& ctx) {
  expect_weights(ctx, 0);
  expect_min_rank(ctx, 0, 1);
  DType out = ctx.attrs().get_dtype("dtype");
  if (!is_float(out))
    ctx.fail_type("expected attribute dtype f32, f64, f16 or bf16, got ", dtype_name(out));
  const Shape& w = ctx.shape(0);
  expect_whole_blocks(ctx, 0, w.back());
  if (ctx.num_inputs() == 1) return {{out, w}};
  expect_rank(ctx, 0, 2);
  DType it = ctx.dtype(1);
  expect_dtype(ctx, 1, it == DType::i32 || it == DType::i64, "i32 or i64 row indices");
  Shape s = ctx.shape(1);
  s.push_back(w[1]);
  return {{out, s}};
}

// A batched table is not supported (a quantized one cannot be moved between axes); batched
// indices look up the same rows, and a batched table without indices decodes in place
// unless the batch axis is the last (blocked) one.
VmapResult dequantize_vmap(const RuleArgs& a, std::span<const int> in_axes) {
  Value w = a.inputs[0];
  if (a.inputs.size() == 2) {
    if (in_axes[0] >= 0)
      fail<NotSupported>("dequantize", "expected unbatched weights under vmap with row indices");
    return {{op("dequantize", {w, a.inputs[1]}, a.attrs)}, {in_axes[1]}};
  }
  if (in_axes[0] == w.rank() - 1) {
    if (is_quantized(w.dtype()))
      fail<NotSupported>("dequantize", "expected the batch axis of quantized weights before the ",
                         "last (blocked) dim, got axis ", in_axes[0], " of ", w.type().str());
    w = rules::moveaxis(w, in_axes[0], 0);
    return {{op("dequantize", {w}, a.attrs)}, {0}};
  }
  return {{op("dequantize", {w}, a.attrs)}, {in_axes[0]}};
}

// ---- quant_matmul ----------------------------------------------------------------------

// x (input xi) @ w^T (input wi)'s shape, the weights' layout checked.
Shape product_shape(const InferContext& ctx, size_t xi, size_t wi) {
  expect_float(ctx, xi);
  expect_weights(ctx, wi);
  expect_min_rank(ctx, xi, 1);
  expect_rank(ctx, wi, 2);
  const Shape &x = ctx.shape(xi), &w = ctx.shape(wi);
  Dim k = unify_dims(
      ctx, x.back(), w[1],
      str_cat("contraction dims of ", ctx.input(xi).str(), " and ", ctx.input(wi).str()));
  expect_whole_blocks(ctx, wi, k);
  const std::string& layout = ctx.attrs().get_string("layout");
  if (const int rows = quant::layout_rows(layout); rows > 1) {
    if (!quant::interleavable(ctx.dtype(wi), rows))
      ctx.fail_type("expected weights of a dtype with the interleaved form ", layout, " (",
                    rows == 8 ? "q4_0, q8_0" : "q4_0, q8_0, q4_k", "), got ", ctx.input(wi).str());
    if (w[0].is_static() && w[0].value() % rows != 0)
      ctx.fail("expected a multiple of ", rows, " weight rows for layout ", layout, ", got ",
               ctx.input(wi).str());
  } else if (layout == quant::kTiles16) {
    if (!quant::tileable(ctx.dtype(wi)))
      ctx.fail_type("expected weights of a dtype with the tiled form tiles16 (q8_0, q4_k), got ",
                    ctx.input(wi).str());
    if (w[0].is_static() && w[0].value() % 16 != 0)
      ctx.fail("expected a multiple of 16 weight rows for layout tiles16, got ",
               ctx.input(wi).str());
  }
  Shape out(x.begin(), x.end() - 1);
  out.push_back(w[0]);
  return out;
}

// The addend (input ci, when there is one) broadcasts onto out without growing it.
void expect_addend(const InferContext& ctx, size_t ci, const Shape& out) {
  if (ctx.num_inputs() <= ci) return;
  expect_same_dtype(ctx, 0, ci);
  if (broadcast_shapes(ctx, out, ctx.shape(ci)).size() != out.size())
    ctx.fail("expected an addend c that broadcasts onto the product ",
             TensorType{ctx.dtype(0), out}.str(), " without growing it, got ", ctx.input(ci).str());
}

Types infer_quant_matmul(const InferContext& ctx) {
  Shape out = product_shape(ctx, 0, 1);
  expect_addend(ctx, 2, out);
  return {{ctx.dtype(0), out}};
}

// y plus the addend c (input 2) where there is one.
Value plus_addend(const RuleArgs& a, Value y) { return a.inputs.size() == 3 ? y + a.inputs[2] : y; }

// w decoded to dtype t, then contracted with v's last dim (against w's dim `wdim`).
Value times_dequantized(Value v, Value w, int64_t wdim, DType t) {
  Value wd = op("dequantize", {w}, {{"dtype", t}});
  return op("dot_general", {v, wd},
            {{"lhs_contracting", IntList{v.rank() - 1}}, {"rhs_contracting", IntList{wdim}}});
}

// Interleaved weights are a CPU inference form: nothing decodes them as a tensor.
void expect_plain(const RuleArgs& a, const char* what) {
  if (a.attrs.get_string("layout") != "rows")
    fail<NotSupported>("quant_matmul", "expected plain weights (layout rows) for ", what,
                       ", got layout ", a.attrs.get_string("layout"),
                       " (an inference form the CPU kernel reads)");
}

Values quant_matmul_decomposed(const RuleArgs& a) {
  expect_plain(a, "a decomposition");
  return {plus_addend(a, times_dequantized(a.inputs[0], a.inputs[1], 1, a.inputs[0].dtype()))};
}

// dx = g @ dequantize(w); the weights get no gradient; dc = g summed to c's shape.
Values quant_matmul_vjp(const RuleArgs& a, std::span<const Value> cts) {
  expect_plain(a, "a gradient");
  Values out{times_dequantized(cts[0], a.inputs[1], 0, a.inputs[0].dtype()), Value{}};
  if (a.inputs.size() == 3) out.push_back(rules::unbroadcast(cts[0], a.inputs[2]));
  return out;
}

Values quant_matmul_jvp(const RuleArgs& a, std::span<const Value> ts) {
  Value t = ts[0].valid() ? op("quant_matmul", {ts[0], a.inputs[1]}, a.attrs) : Value{};
  return {a.inputs.size() == 3 ? rules::add_any(t, ts[2]) : t};
}

// x's leading dims are independent rows: a batch axis there stays; one at k moves first.
// Batched weights (not the decode case) go through their decoded values, one product per
// batch element.
VmapResult quant_matmul_vmap(const RuleArgs& a, std::span<const int> in_axes);

// With an addend: the product's vmap, then c added with both batch axes in front (c
// padded with unit dims up to the product's rank).
VmapResult addend_vmap(const RuleArgs& a, std::span<const int> in_axes) {
  RuleArgs two = a;
  two.inputs = a.inputs.subspan(0, 2);
  VmapResult r = quant_matmul_vmap(two, in_axes.subspan(0, 2));
  Value y = r.outputs[0], c = a.inputs[2];
  if (r.out_axes[0] < 0 && in_axes[2] < 0) return {{y + c}, {-1}};
  if (r.out_axes[0] >= 0) y = rules::moveaxis(y, r.out_axes[0], 0);
  if (in_axes[2] >= 0) {
    c = rules::moveaxis(c, in_axes[2], 0);
    const int64_t rank = y.rank() + (r.out_axes[0] >= 0 ? 0 : 1);
    IntList unit;
    for (int64_t d = c.rank(); d < rank; ++d) unit.push_back(d - c.rank() + 1);
    if (!unit.empty()) c = rules::expand_dims(c, unit);
  }
  return {{y + c}, {0}};
}

VmapResult quant_matmul_vmap(const RuleArgs& a, std::span<const int> in_axes) {
  if (a.inputs.size() == 3) return addend_vmap(a, in_axes);
  Value x = a.inputs[0], w = a.inputs[1];
  int ax = in_axes[0];
  if (in_axes[1] >= 0) {
    expect_plain(a, "batched weights");
    Value wd = op("dequantize", {w}, {{"dtype", x.dtype()}});
    wd = rules::moveaxis(wd, in_axes[1], 0);  // [B, n, k]
    if (ax < 0)                               // x's free dims, then B and n
      return {{op("dot_general", {x, wd},
                  {{"lhs_contracting", IntList{x.rank() - 1}}, {"rhs_contracting", IntList{2}}})},
              {int(x.rank() - 1)}};
    x = rules::moveaxis(x, ax, 0);
    return {{op("dot_general", {x, wd},
                {{"lhs_contracting", IntList{x.rank() - 1}},
                 {"rhs_contracting", IntList{2}},
                 {"lhs_batch", IntList{0}},
                 {"rhs_batch", IntList{0}}})},
            {0}};
  }
  if (ax == x.rank() - 1) {
    x = rules::moveaxis(x, ax, 0);
    ax = 0;
  }
  return {{op("quant_matmul", {x, w}, a.attrs)}, {ax}};
}

// ---- fused_quant_matmul ------------------------------------------------------------------
// quant_matmul with what surrounds it in an LLM block folded in (matmul_fusion): the
// rms_norm before it (norm "rms_norm": input 1 is the norm's scale) and the swiglu after it
// (activation "swiglu" over the product's halves), then the addend.

bool has_norm(const Attrs& a) { return a.get_string("norm") == "rms_norm"; }

Types infer_fused_quant_matmul(const InferContext& ctx) {
  const bool norm = has_norm(ctx.attrs());
  const size_t wi = norm ? 2 : 1;
  if (ctx.num_inputs() < wi + 1)
    ctx.fail("expected x, ", norm ? "the norm's scale, " : "", "w and an optional addend, got ",
             ctx.num_inputs(), " inputs");
  Shape out = product_shape(ctx, 0, wi);
  if (norm) {
    expect_same_dtype(ctx, 0, 1);
    expect_rank(ctx, 1, 1);
    unify_dims(ctx, ctx.shape(1)[0], ctx.shape(0).back(),
               str_cat("the norm's scale ", ctx.input(1).str(), " and x's last dim"));
    expect_at_least(ctx, "epsilon", ctx.attrs().get_float("epsilon"), 0.0);
  }
  if (ctx.attrs().get_string("activation") == "swiglu") {
    Dim& n = out.back();
    if (n.is_static() && n.value() % 2 != 0)
      ctx.fail("expected an even number of weight rows (gate and up halves) for swiglu, got ",
               ctx.input(wi).str());
    n = n.is_static() ? Dim(n.value() / 2) : Dim::unknown();
  }
  expect_addend(ctx, wi + 1, out);
  return {{ctx.dtype(0), out}};
}

Values fused_quant_matmul_decomposed(const RuleArgs& a) {
  const bool norm = has_norm(a.attrs);
  const size_t wi = norm ? 2 : 1;
  Value x = a.inputs[0];
  if (norm)
    x = op("rms_norm", {x, a.inputs[1]},
           {{"axis", int64_t(-1)}, {"epsilon", a.attrs.get_float("epsilon")}});
  Value y = op("quant_matmul", {x, a.inputs[wi]}, {{"layout", a.attrs.get_string("layout")}});
  if (a.attrs.get_string("activation") == "swiglu") y = op("swiglu", {y});
  return {a.inputs.size() > wi + 1 ? y + a.inputs[wi + 1] : y};
}

}  // namespace

void register_quant_ops(OpRegistry& r) {
  OpDef dq;
  dq.name = "dequantize";
  dq.traits = Trait::nondifferentiable;
  dq.arity(1, 2).attr("dtype", AttrKind::DType, AttrValue(DType::f32));
  dq.doc =
      "Weights in storage form (any block-quantized dtype, f32, f16, bf16) decoded to dtype "
      "(f32 default, f64, f16, bf16), same shape; the last dim must fill whole blocks. With "
      "i32 / i64 `rows`, w is a table [V, k] and the result rows.shape + [k] holds only those "
      "rows (an embedding lookup). No gradient (not even for float w: use cast / embedding "
      "there); vmap batches the rows.";
  dq.infer = infer_dequantize;
  dq.vmap = dequantize_vmap;
  r.add(std::move(dq));

  OpDef mm;
  mm.name = "quant_matmul";
  // The weights' layouts (rlx/quant.h): plain rows, the CPU's interleaved groups, CUDA's tiles.
  const std::vector<std::string> layouts = {"rows", "rows8", "rows16",
                                            std::string(quant::kTiles16)};
  mm.arity(2, 3).attr("layout", AttrKind::String, AttrValue("rows"), layouts);
  mm.doc =
      "x [..., k] @ w^T (+ c) for weights w [n, k] in storage form (any block-quantized dtype, "
      "f32, f16, bf16) → [..., n] in x's dtype (a float); k must be a multiple of w's block; "
      "the optional addend c (x's dtype) broadcasts onto the product without growing it. The "
      "CPU kernel quantizes x per block to int8 and runs integer dot products, never decoding "
      "the whole of w. Gradient and tangent through x only; vmap over x. layouts rows8 / rows16: "
      "w's bytes interleaved in groups of 8 / 16 rows (rlx/quant.h; q4_0, q8_0, and q4_k in "
      "rows16; n a multiple of the group), the forms the CPU decode kernels read fastest; "
      "tiles16: q8_0 / q4_k in 16-row tensor-core tiles, the form CUDA's decode kernels read (the "
      "CPU kernel decodes it back per call); no decomposition or gradient for these layouts.";
  mm.infer = infer_quant_matmul;
  mm.decompose = quant_matmul_decomposed;
  mm.vjp = quant_matmul_vjp;
  mm.jvp = quant_matmul_jvp;
  mm.vmap = quant_matmul_vmap;
  r.add(std::move(mm));

  OpDef fq;
  fq.name = "fused_quant_matmul";
  fq.arity(2, 4)
      .attr("norm", AttrKind::String, AttrValue("none"), {"none", "rms_norm"})
      .attr("epsilon", AttrKind::Float, AttrValue(1e-6))
      .attr("activation", AttrKind::String, AttrValue("none"), {"none", "swiglu"})
      .attr("layout", AttrKind::String, AttrValue("rows"), layouts);
  fq.doc =
      "act(quant_matmul(norm(x), w)) + c: inputs x, [scale (norm rms_norm: rms_norm over x's "
      "last dim with this scale and epsilon)], w, [c]; activation swiglu takes silu of the "
      "product's first half times its second (output n / 2 wide). What matmul_fusion makes "
      "of an LLM block's norm -> product -> swiglu -> residual add where a device runs it as "
      "one kernel; rules by its decomposition.";
  fq.infer = infer_fused_quant_matmul;
  fq.decompose = fused_quant_matmul_decomposed;
  set_rules_by_decomposition(fq);
  r.add(std::move(fq));
}

}  // namespace rlx::detail
