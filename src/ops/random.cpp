// Random number generators. Counter-based (Philox4x32-10 keyed by `seed`), so a draw
// depends only on (seed, key, element index) and is reproducible across backends.
#include <cmath>

#include "ops/families.h"
#include "ops/infer_util.h"
#include "rlx/rules.h"

namespace rlx::detail {

namespace {

// Shared checks: the optional key input, the dtype and shape attributes.
std::vector<TensorType> infer_random(const InferContext& ctx) {
  if (ctx.num_inputs() == 1) {
    expect_integer(ctx, 0);
    if (ctx.rank(0) != 0) ctx.fail("expected an integer scalar key, got ", ctx.input(0).str());
  }
  const Attrs& a = ctx.attrs();
  DType dt = a.get_dtype("dtype");
  if (!is_float(dt)) ctx.fail_type("expected a float dtype, got ", dtype_name(dt));
  const IntList& shape = a.get_ints("shape");
  Shape out;
  for (int64_t n : shape) {
    if (n < 0) {
      std::string list;
      for (int64_t m : shape) list += str_cat(list.empty() ? "" : ",", m);
      ctx.fail("expected shape entries >= 0, got [", list, "]");
    }
    out.push_back(Dim(n));
  }
  if (a.has("low")) {
    double lo = a.get_float("low"), hi = a.get_float("high");
    if (!(lo < hi) || !std::isfinite(lo) || !std::isfinite(hi))
      ctx.fail("expected finite low < high, got low ", lo, " and high ", hi);
  } else {
    double mean = a.get_float("mean"), std = a.get_float("std");
    if (!std::isfinite(mean) || !(std >= 0.0) || !std::isfinite(std))
      ctx.fail("expected a finite mean and std >= 0, got mean ", mean, " and std ", std);
  }
  return {{dt, out}};
}

}  // namespace

void register_random_ops(OpRegistry& r) {
  struct Entry {
    const char* name;
    const char* param1;  // the distribution's two Float attributes and their defaults
    double default1;
    const char* param2;
    double default2;
    const char* doc;
  };
  const Entry table[] = {
      {.name = "uniform",
       .param1 = "low",
       .default1 = 0.0,
       .param2 = "high",
       .default2 = 1.0,
       .doc = "Uniform samples in [low, high)"},
      {.name = "normal",
       .param1 = "mean",
       .default1 = 0.0,
       .param2 = "std",
       .default2 = 1.0,
       .doc = "Normal samples with mean and std"},
  };
  for (const Entry& e : table) {
    OpDef d;
    d.name = e.name;
    d.traits = Trait::random | Trait::nondifferentiable;
    d.arity(0, 1)
        .attr("shape", AttrKind::Ints)
        .attr("dtype", AttrKind::DType, AttrValue(DType::f32))
        .attr("seed", AttrKind::Int, AttrValue(0))
        .attr(e.param1, AttrKind::Float, AttrValue(e.default1))
        .attr(e.param2, AttrKind::Float, AttrValue(e.default2));
    d.doc = str_cat(e.doc,
                    " of dtype[shape], from the counter-based Philox4x32-10 generator "
                    "keyed by seed (optional integer scalar key input: added to the counter), so "
                    "results are reproducible across backends.");
    d.infer = infer_random;
    // Only a batched key batches a draw: one draw per key, so a loop over the keys.
    d.vmap = rules::vmap_by_scan;
    r.add(std::move(d));
  }
}

}  // namespace rlx::detail
