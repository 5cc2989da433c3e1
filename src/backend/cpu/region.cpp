// fused_elementwise on the CPU: a tiled interpreter of the region's body.
//
// The body is compiled once (per body graph, cached) into steps: one per op, each a
// vectorisable loop over tile buffers written with the functors of elementwise_ops.h. A
// run splits the region's index space into tiles of kTile elements (a few L1-resident
// buffers) spread over the threads; per tile it loads each input (contiguous inputs whose
// storage is the compute type are read in place; broadcast, strided and 16-bit inputs are
// gathered and widened), runs the steps, and stores each output (with streaming stores for
// large outputs, which skip the read a normal store of a cold line costs; large inputs
// read in place are prefetched a tile ahead, a slice per step). So every input is read
// once and every output written once. Values that are the same at every element
// (scalars, constants, ops on them) are filled or computed once per thread.
//
// A run of two or more consecutive f32 steps whose ops region_jit.h generates code for
// (arithmetic, max / min, relu, abs, neg, square, sqrt, rsqrt, reciprocal, exp, sigmoid,
// hard_sigmoid) becomes one step of AVX-512 or AVX2 machine code (the kernels' level) that
// keeps the run's values in registers; when it is the whole body, it writes the region's
// f32 outputs straight to their tensors. Elsewhere, a cheap f32 op whose value only the
// next op reads runs with it in one loop (a pair from a small set of templates), so the
// value skips its tile's L1 round trip, which bounds each step.
//
// Measured against the alternatives (bench/fusion_bench.cpp, 6-op f32 chains on 16M
// elements, 2 cores): per-op loops over whole tensors (opt_level 0) are 2.2-2.9x slower on
// a chain with a sigmoid and 4.2-5x on an arithmetic one; tiles of 512 to 1024 elements
// beat larger ones (2048: 1.3x, 4096 and more: 1.8x slower, the live tiles no longer in
// L1); pairs cut the arithmetic chain's time by a third; streaming stores and the
// prefetch gain ~5-15%. A hand-written loop that keeps the whole chain in registers was
// 1.0-1.6x faster still; the generated code runs the arithmetic chain at 0.94-1.17x the
// copy limit where the pairs ran 1.4-1.7x (the same machine, one session), and the
// sigmoid chain, bound by the sigmoid's arithmetic on two cores, 10-15% faster.
//
// Trailing reductions fold each tile's row segments into per-row accumulators (f64 for
// float sums, products and means, wrapping uint64 for integers, the compute type for max
// and min, as the reduce kernels do); rows split between threads are combined after.
//
// f16 / bf16 values are computed in f32 inside the tile and rounded when stored; a cast to
// them rounds right away, so an explicit cast still quantises.
#include "ops/region.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <tuple>
#include <unordered_map>

#include "backend/cpu/cpu_util.h"
#include "backend/cpu/elementwise_loops.h"
#include "backend/cpu/elementwise_ops.h"
#include "backend/cpu/elementwise_table.h"
#include "backend/cpu/families.h"
#include "backend/cpu/isa.h"
#include "backend/cpu/region_jit.h"
#include "rlx/axes.h"

namespace rlx::cpu {
inline namespace RLX_ISA_NS {

namespace {

using namespace ewop;
using detail::is_region_reduction;
using detail::is_region_view_op;

// Elements per tile: each value's tile is 4 KiB in f32, so a body's live tiles stay in L1
// (measured on a 6-op f32 chain: 512 and 1024 best, 2048 1.3x and 4096+ 1.8x slower).
constexpr int64_t kTile = 1024;
constexpr int64_t kGrain = 1 << 15;  // elements per thread chunk at least
// Outputs at least this large are stored with streaming stores (they would not stay in
// cache for the next op anyway), and inputs this large are prefetched a tile ahead.
constexpr int64_t kStreamBytes = int64_t(4) << 20;

const char* const kWhere = "fused_elementwise";
// A body that is one generated run is called in this many slices a tile, each after its
// slice of the next tile's prefetch (slice starts are multiples of 16 elements).
constexpr int64_t kSlices = 4;

// ---- compute types ---------------------------------------------------------------------

// Calls f(Tag<C>{}) with the compute type of dtype t: float for f32 / f16 / bf16, uint8_t
// for u8 and bool. Each op is instantiated once per compute type, not per storage type.
template <class F>
void visit_compute(DType t, F&& f) {
  switch (t) {
    case DType::f32:
    case DType::f16:
    case DType::bf16:
      return f(Tag<float>{});
    case DType::f64:
      return f(Tag<double>{});
    case DType::i8:
      return f(Tag<int8_t>{});
    case DType::i16:
      return f(Tag<int16_t>{});
    case DType::i32:
      return f(Tag<int32_t>{});
    case DType::i64:
      return f(Tag<int64_t>{});
    case DType::u8:
    case DType::boolean:
      return f(Tag<uint8_t>{});
    default:
      break;  // no elementwise op takes strings or quantized blocks: no region holds one
  }
  fail<NotSupported>(kWhere, "expected a numeric or bool value, got ", dtype_name(t));
}

size_t compute_size(DType t) {
  size_t s = 0;
  visit_compute(t, [&](auto tag) { s = sizeof(typename decltype(tag)::type); });
  return s;
}

// Whether storage and compute type are the same, so a tile can point into the tensor.
bool computes_in_place(DType t) { return t != DType::f16 && t != DType::bf16; }

// ---- steps -----------------------------------------------------------------------------

// A step reads its operand tiles and writes its result tile: p[slot] is each value's tile.
using StepFn = std::function<void(void* const* p, int64_t n)>;

template <class Op, bool ToBool = false>
StepFn unary_step(const Attrs& attrs, DType in, int x, int y) {
  if (!in_set(in, Op::set)) return {};
  Op op = make_op<Op>(attrs);
  StepFn f;
  visit_compute(in, [&](auto tag) {
    using C = typename decltype(tag)::type;
    using R = std::conditional_t<ToBool, uint8_t, C>;
    if constexpr (takes<C>(Op::set))
      f = [op, x, y](void* const* p, int64_t n) {
        ew::apply_n(op, static_cast<const C*>(p[x]), static_cast<R*>(p[y]), n);
      };
  });
  return f;
}

StepFn gelu_step(const Attrs& attrs, DType in, int x, int y) {
  if (attrs.get_string("approximate") == "tanh") return unary_step<GeluTanh>(attrs, in, x, y);
  return unary_step<GeluErf>(attrs, in, x, y);
}

template <class Op, bool ToBool = false>
StepFn binary_step(DType in, int a, int b, int y) {
  if (!in_set(in, Op::set)) return {};
  StepFn f;
  visit_compute(in, [&](auto tag) {
    using C = typename decltype(tag)::type;
    using R = std::conditional_t<ToBool, uint8_t, C>;
    if constexpr (takes<C>(Op::set))
      f = [a, b, y](void* const* p, int64_t n) {
        const C* pa = static_cast<const C*>(p[a]);
        const C* pb = static_cast<const C*>(p[b]);
        R* py = static_cast<R*>(p[y]);
        Op op;
        for (int64_t i = 0; i < n; ++i) py[i] = R(op(pa[i], pb[i]));
      };
  });
  return f;
}

StepFn select_step(DType in, int c, int a, int b, int y) {
  StepFn f;
  visit_compute(in, [&](auto tag) {
    using C = typename decltype(tag)::type;
    f = [c, a, b, y](void* const* p, int64_t n) {
      const uint8_t* pc = static_cast<const uint8_t*>(p[c]);
      const C* pa = static_cast<const C*>(p[a]);
      const C* pb = static_cast<const C*>(p[b]);
      C* py = static_cast<C*>(p[y]);
      for (int64_t i = 0; i < n; ++i) py[i] = pc[i] ? pa[i] : pb[i];
    };
  });
  return f;
}

StepFn clamp_step(DType in, int x, int lo, int hi, int y) {
  if (!in_set(in, kNumeric)) return {};
  StepFn f;
  visit_compute(in, [&](auto tag) {
    using C = typename decltype(tag)::type;
    f = [x, lo, hi, y](void* const* p, int64_t n) {
      const C* px = static_cast<const C*>(p[x]);
      const C* pl = static_cast<const C*>(p[lo]);
      const C* ph = static_cast<const C*>(p[hi]);
      C* py = static_cast<C*>(p[y]);
      for (int64_t i = 0; i < n; ++i) py[i] = Min{}(Max{}(px[i], pl[i]), ph[i]);
    };
  });
  return f;
}

// A cast converts between compute types; to f16 / bf16 it also rounds to the 16-bit type.
StepFn cast_step(DType from, DType to, int x, int y) {
  StepFn f;
  visit_compute(from, [&](auto in_tag) {
    using C = typename decltype(in_tag)::type;
    visit(to, kAll, kWhere, [&](auto out_tag) {
      using U = typename decltype(out_tag)::type;
      using R = compute_t<U>;
      bool to_bool = is_bool(to);
      f = [x, y, to_bool](void* const* p, int64_t n) {
        const C* px = static_cast<const C*>(p[x]);
        R* py = static_cast<R*>(p[y]);
        if (to_bool) {
          for (int64_t i = 0; i < n; ++i) py[i] = R(convert<U, true>(px[i]));
        } else {
          for (int64_t i = 0; i < n; ++i) {
            R r = convert<U, false>(px[i]);
            if constexpr (is_half_v<U>) r = load(store<U>(r));
            py[i] = r;
          }
        }
      };
    });
  });
  return f;
}

// One body node as a step, or an empty function when the interpreter cannot run it.
using StepMaker = StepFn (*)(const Node& n, const std::vector<int>& in, int out);

template <class Op, bool ToBool = false>
StepFn make_unary(const Node& n, const std::vector<int>& in, int out) {
  return unary_step<Op, ToBool>(n.attrs, n.inputs[0].dtype(), in[0], out);
}
template <class Op, bool ToBool = false>
StepFn make_binary(const Node& n, const std::vector<int>& in, int out) {
  return binary_step<Op, ToBool>(n.inputs[0].dtype(), in[0], in[1], out);
}

const std::unordered_map<std::string_view, StepMaker>& step_makers() {
  static const std::unordered_map<std::string_view, StepMaker> m = {
#define RLX_UNARY_ROW(op, F) {#op, make_unary<F>},
#define RLX_UNARY_BOOL_ROW(op, F) {#op, make_unary<F, true>},
#define RLX_BINARY_ROW(op, F) {#op, make_binary<F>},
#define RLX_BINARY_BOOL_ROW(op, F) {#op, make_binary<F, true>},
      RLX_CPU_UNARY_OPS(RLX_UNARY_ROW)              //
      RLX_CPU_UNARY_BOOL_OPS(RLX_UNARY_BOOL_ROW)    //
      RLX_CPU_BINARY_OPS(RLX_BINARY_ROW)            //
      RLX_CPU_BINARY_BOOL_OPS(RLX_BINARY_BOOL_ROW)  //
      RLX_CPU_COMPARE_OPS(RLX_BINARY_BOOL_ROW)      //
#undef RLX_UNARY_ROW
#undef RLX_UNARY_BOOL_ROW
#undef RLX_BINARY_ROW
#undef RLX_BINARY_BOOL_ROW
      {"gelu", [](const Node& n, const std::vector<int>& in,
                  int out) { return gelu_step(n.attrs, n.inputs[0].dtype(), in[0], out); }},
      {"select",
       [](const Node& n, const std::vector<int>& in, int out) {
         return select_step(n.inputs[1].dtype(), in[0], in[1], in[2], out);
       }},
      {"clamp", [](const Node& n, const std::vector<int>& in,
                   int out) { return clamp_step(n.inputs[0].dtype(), in[0], in[1], in[2], out); }},
      {"cast",
       [](const Node& n, const std::vector<int>& in, int out) {
         return cast_step(n.inputs[0].dtype(), n.outputs[0].dtype(), in[0], out);
       }},
  };
  return m;
}

// ---- reductions ------------------------------------------------------------------------

// A row's running fold: f64 for float sums / products / means and for float max / min
// (exact for f32), wrapping uint64 for integer sums / products, int64 for integer max / min.
struct Acc {
  double d = 0;
  uint64_t u = 0;
  int64_t i = 0;
};

struct Reducer {
  void (*init)(Acc&);
  void (*fold)(const void* x, int64_t n, Acc&);  // x: compute-type tile values
  void (*combine)(Acc&, const Acc&);
  void (*finish)(const Acc&, int64_t count, void* out, int64_t row);  // out: storage
};

constexpr int kLanes = 16;

template <class C>
struct SumFold {
  static constexpr bool fp = std::is_floating_point_v<C>;
  using A = std::conditional_t<fp, double, uint64_t>;
  static A& acc(Acc& a) {
    if constexpr (fp)
      return a.d;
    else
      return a.u;
  }
  static A id() { return A(0); }
  static A op(A a, A b) { return a + b; }
  static A lift(C x) { return A(x); }
};
template <class C>
struct ProdFold : SumFold<C> {
  using A = typename SumFold<C>::A;
  static A id() { return A(1); }
  static A op(A a, A b) { return a * b; }
};
template <class C, bool IsMax>
struct ExtremeFold {
  static constexpr bool fp = std::is_floating_point_v<C>;
  using A = std::conditional_t<fp, double, int64_t>;
  static A& acc(Acc& a) {
    if constexpr (fp)
      return a.d;
    else
      return a.i;
  }
  static A id() {
    if constexpr (fp)
      return IsMax ? -std::numeric_limits<A>::infinity() : std::numeric_limits<A>::infinity();
    else
      return IsMax ? A(std::numeric_limits<C>::lowest()) : A(std::numeric_limits<C>::max());
  }
  static A op(A a, A b) {
    if constexpr (IsMax)
      return Max{}(a, b);
    else
      return Min{}(a, b);
  }
  static A lift(C x) { return A(x); }
};

// Folds n values lane-wise (kLanes independent accumulators, so the loop vectorises).
template <class F, class C>
void fold_values(const void* px, int64_t n, Acc& acc) {
  using A = typename F::A;
  const C* x = static_cast<const C*>(px);
  A lanes[kLanes];
  for (A& l : lanes) l = F::id();
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int j = 0; j < kLanes; ++j) lanes[j] = F::op(lanes[j], F::lift(x[i + j]));
  A r = F::acc(acc);
  for (A l : lanes) r = F::op(r, l);
  for (; i < n; ++i) r = F::op(r, F::lift(x[i]));
  F::acc(acc) = r;
}

template <class F, class T, bool Mean>
Reducer make_reducer() {
  using C = compute_t<T>;
  using Fd = F;
  return {
      [](Acc& a) { Fd::acc(a) = Fd::id(); }, fold_values<Fd, C>,
      [](Acc& a, const Acc& b) { Fd::acc(a) = Fd::op(Fd::acc(a), Fd::acc(const_cast<Acc&>(b))); },
      [](const Acc& a, int64_t count, void* out, int64_t row) {
        auto v = Fd::acc(const_cast<Acc&>(a));
        T* o = static_cast<T*>(out) + row;
        if constexpr (Mean)
          *o = store<T>(double(v) / double(count));  // 0 / 0: NaN for an empty mean
        else
          *o = store<T>(compute_t<T>(v));
      }};
}

// The reducer of a body reduction node, or nullopt when the interpreter has none.
std::optional<Reducer> reducer_for(std::string_view op, DType t) {
  if (is_bool(t)) return std::nullopt;
  std::optional<Reducer> r;
  visit(t, kNumeric, kWhere, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = compute_t<T>;
    if (op == "sum")
      r = make_reducer<SumFold<C>, T, false>();
    else if (op == "prod")
      r = make_reducer<ProdFold<C>, T, false>();
    else if (op == "reduce_max")
      r = make_reducer<ExtremeFold<C, true>, T, false>();
    else if (op == "reduce_min")
      r = make_reducer<ExtremeFold<C, false>, T, false>();
    else if (op == "mean" && is_float(t))
      r = make_reducer<SumFold<C>, T, true>();
  });
  return r;
}

// ---- pairs of cheap f32 steps ----------------------------------------------------------
// A cheap op whose result only the next op reads runs in one loop with it: the value stays
// in a register instead of taking a round trip through its tile (each step's loop is
// bound by its L1 loads and stores). A small fixed set of templates: the arithmetic and
// the piecewise-linear ops, in f32 (f16 / bf16 compute in f32 too).

template <class F>
constexpr bool kBinaryOp = requires(const F& f, float x) {
  f(x, x);
};

using PairFn = void (*)(const float* a, const float* b, const float* c, float* y, int64_t n);

// y = f2(f1(a[, b])[, c]), the inner result at operand Pos of f2.
template <class F1, class F2, int Pos>
void pair_loop(const float* a, const float* b, const float* c, float* y, int64_t n) {
  const F1 f1{};
  const F2 f2{};
  for (int64_t i = 0; i < n; ++i) {
    float t;
    if constexpr (kBinaryOp<F1>)
      t = f1(a[i], b[i]);
    else
      t = f1(a[i]);
    if constexpr (!kBinaryOp<F2>)
      y[i] = f2(t);
    else if constexpr (Pos == 0)
      y[i] = f2(t, c[i]);
    else
      y[i] = f2(c[i], t);
  }
}

template <class... Fs>
struct OpList {};
using CheapOps = OpList<Add, Sub, Mul, Div, Max, Min, Neg, Relu, Square, Abs>;
template <class F>
constexpr std::string_view kCheapName = "";
#define RLX_CHEAP(F, name) \
  template <>              \
  constexpr std::string_view kCheapName<F> = name;
RLX_CHEAP(Add, "add")
RLX_CHEAP(Sub, "sub")
RLX_CHEAP(Mul, "mul")
RLX_CHEAP(Div, "div")
RLX_CHEAP(Max, "max")
RLX_CHEAP(Min, "min")
RLX_CHEAP(Neg, "neg")
RLX_CHEAP(Relu, "relu")
RLX_CHEAP(Square, "square")
RLX_CHEAP(Abs, "abs")
#undef RLX_CHEAP

using PairKey = std::tuple<std::string_view, std::string_view, int>;  // inner, outer, Pos
struct PairKeyHash {
  size_t operator()(const PairKey& k) const {
    return std::hash<std::string_view>()(std::get<0>(k)) * 31 +
           std::hash<std::string_view>()(std::get<1>(k)) * 7 + size_t(std::get<2>(k));
  }
};
using PairTable = std::unordered_map<PairKey, PairFn, PairKeyHash>;

template <class F1>
struct PairRow {
  template <class... F2s>
  static void add(PairTable& t, OpList<F2s...>) {
    (add_one<F2s>(t), ...);
  }
  template <class F2>
  static void add_one(PairTable& t) {
    t[{kCheapName<F1>, kCheapName<F2>, 0}] = pair_loop<F1, F2, 0>;
    if constexpr (kBinaryOp<F2>) t[{kCheapName<F1>, kCheapName<F2>, 1}] = pair_loop<F1, F2, 1>;
  }
};

template <class... Fs>
PairTable make_pairs(OpList<Fs...> ops) {
  PairTable t;
  (PairRow<Fs>::add(t, ops), ...);
  return t;
}

const PairTable& pairs() {
  static const PairTable t = make_pairs(CheapOps{});
  return t;
}

// ---- the compiled body ---------------------------------------------------------------

enum class Kind : uint8_t { arg, view, constant, computed, reduced };

struct Slot {
  Kind kind = Kind::computed;
  DType dtype = DType::f32;
  int node = -1;                   // the body node making it (not for args)
  int arg = -1;                    // arg: its index
  bool read = false;               // read by a step, a reduction or an output: needs a tile
  int reduction = -1;              // reduced: its index in Compiled::reductions
  std::array<uint8_t, 8> value{};  // constant: the value in its compute type
};

struct Step {
  int out;
  std::vector<int> in;
  StepFn fn;
  std::string_view op;        // the body op (pairs: the consumer's)
  bool floats = false;        // operands and result computed in f32
  std::vector<float> params;  // the op's jit::attributes()
  // A generated run (region_jit.h): its code, and the values it writes besides `out`.
  jit::Code code;
  std::vector<int> more_out;
};

struct OutputDesc {
  int slot;
  int reduction = -1;  // index into reductions, or -1
};

struct ReductionDesc {
  int src;  // slot reduced
  Reducer fns;
  int output = -1;  // the body output it is (a reduction nothing reads is not run)
};

struct Compiled {
  const Graph* body = nullptr;
  std::vector<Slot> slots;  // per body value id
  std::vector<Step> steps;  // body order
  std::vector<OutputDesc> outputs;
  std::vector<ReductionDesc> reductions;
  int64_t reduced_axes = -1;  // trailing axes every reduction folds (-1: none)
};

// Replaces each run of two or more consecutive f32 steps that region_jit generates code for
// by one step running that code; it writes the run's values that later steps, outputs or
// reductions read. (Where it generates none, the steps stay for pair_steps.)
// Per slot: the steps that read it, plus `outside` for each output or reduction reading it.
std::vector<int> slot_reads(const Compiled& c, int outside) {
  std::vector<int> reads(c.slots.size(), 0);
  for (const Step& st : c.steps)
    for (int v : st.in) ++reads[size_t(v)];
  for (const OutputDesc& o : c.outputs) reads[size_t(o.slot)] += outside;
  for (const ReductionDesc& r : c.reductions) reads[size_t(r.src)] += outside;
  return reads;
}

void jit_steps(Compiled& c) {
  const std::vector<int> reads = slot_reads(c, 1);
  std::vector<int> as_output(c.slots.size(), 0);
  for (const OutputDesc& o : c.outputs)
    if (o.reduction < 0) ++as_output[size_t(o.slot)];
  auto fits = [](const Step& st) {
    return st.floats && !st.op.empty() && jit::supports(st.op) && !st.in.empty();
  };
  std::vector<Step> kept;
  for (size_t b = 0; b < c.steps.size();) {
    size_t e = b;
    while (e < c.steps.size() && fits(c.steps[e])) ++e;
    if (e - b < 2) {
      kept.push_back(std::move(c.steps[b]));
      ++b;
      continue;
    }
    jit::Run run;
    std::vector<int> inner(c.slots.size(), 0), ins;
    std::vector<bool> made(c.slots.size(), false);
    for (size_t j = b; j < e; ++j) {
      const Step& st = c.steps[j];
      run.ops.push_back({st.op, st.out, st.in, st.params});
      for (int v : st.in) {
        ++inner[size_t(v)];
        if (!made[size_t(v)] && std::find(ins.begin(), ins.end(), v) == ins.end()) ins.push_back(v);
      }
      made[size_t(st.out)] = true;
    }
    // Written: what is read after the run (its last value always). Streamed: f32 outputs
    // of the region, which the runner may point at the output tensor.
    std::vector<bool> stream;
    for (size_t j = b; j < e; ++j) {
      int v = c.steps[j].out;
      if (reads[size_t(v)] > inner[size_t(v)] || j + 1 == e) {
        run.outputs.push_back(v);
        stream.push_back(as_output[size_t(v)] == 1 && c.slots[size_t(v)].dtype == DType::f32);
      }
    }
    jit::Code code = jit::compile(run, stream);
    if (!code.plain) {
      for (size_t j = b; j < e; ++j) kept.push_back(std::move(c.steps[j]));
      b = e;
      continue;
    }
    jit::RunFn fn = code.plain;
    Step st{run.outputs.back(), std::move(ins), [fn](void* const* p, int64_t n) { fn(p, 0, n); }};
    st.more_out.assign(run.outputs.begin(), run.outputs.end() - 1);
    st.code = std::move(code);
    kept.push_back(std::move(st));
    b = e;
  }
  c.steps = std::move(kept);
}

// Merges each cheap f32 step into the next step that is its value's only reader (a body
// output, a reduced value or a value read twice keeps its own step).
void pair_steps(Compiled& c) {
  const std::vector<int> reads = slot_reads(c, 2);  // an output is never a single read
  std::vector<int> maker(c.slots.size(), -1);
  std::vector<uint8_t> gone(c.steps.size(), 0);
  for (size_t j = 0; j < c.steps.size(); ++j) {
    Step& outer = c.steps[j];
    maker[size_t(outer.out)] = int(j);
    if (!outer.floats || outer.in.size() > 2) continue;
    for (size_t pos = 0; pos < outer.in.size(); ++pos) {
      int v = outer.in[pos], i = maker[size_t(v)];
      if (i < 0 || gone[size_t(i)] || reads[size_t(v)] != 1) continue;
      const Step& inner = c.steps[size_t(i)];
      if (!inner.floats || inner.in.size() > 2 || inner.op.empty()) continue;
      auto it = pairs().find({inner.op, outer.op, int(pos)});
      if (it == pairs().end()) continue;
      PairFn fn = it->second;
      std::vector<int> in = inner.in;
      in.resize(2, in[0]);  // a unary inner op ignores b
      int other = outer.in.size() == 2 ? outer.in[1 - pos] : in[0];
      int a = in[0], b = in[1], y = outer.out;
      outer.fn = [fn, a, b, other, y](void* const* p, int64_t n) {
        fn(static_cast<const float*>(p[a]), static_cast<const float*>(p[b]),
           static_cast<const float*>(p[other]), static_cast<float*>(p[y]), n);
      };
      std::vector<int> ins = inner.in;
      if (outer.in.size() == 2) ins.push_back(other);
      outer.in = std::move(ins);
      outer.op = {};  // a pair is not paired again
      gone[size_t(i)] = 1;
      break;
    }
  }
  std::vector<Step> kept;
  for (size_t j = 0; j < c.steps.size(); ++j)
    if (!gone[j]) kept.push_back(std::move(c.steps[j]));
  c.steps = std::move(kept);
}

// Compiles the body, or returns null when some node is not one the interpreter runs.
std::shared_ptr<const Compiled> compile(const Graph& body) {
  auto c = std::make_shared<Compiled>();
  c->body = &body;
  c->slots.resize(body.num_values());
  for (size_t i = 0; i < body.args().size(); ++i) {
    Slot& s = c->slots[size_t(body.args()[i].value.id)];
    s.kind = Kind::arg;
    s.arg = int(i);
    s.dtype = body.args()[i].value.dtype();
  }
  const auto& makers = step_makers();
  const auto& nodes = body.nodes();
  for (size_t i = 0; i < nodes.size(); ++i) {
    const Node& n = nodes[i];
    if (n.outputs.size() != 1 || !n.subgraphs.empty()) return nullptr;
    int out = n.outputs[0].id;
    Slot& s = c->slots[size_t(out)];
    s.node = int(i);
    s.dtype = n.outputs[0].dtype();
    std::vector<int> in;
    for (Value v : n.inputs) in.push_back(v.id);
    const std::string& name = n.op_name();
    if (name == "constant") {
      const Literal& lit = n.attrs.get_tensor("value");
      if (lit.numel() != 1) return nullptr;
      s.kind = Kind::constant;
      visit(s.dtype, kAll, kWhere, [&](auto tag) {
        using T = typename decltype(tag)::type;
        compute_t<T> v = load(*static_cast<const T*>(lit.data()));
        std::memcpy(s.value.data(), &v, sizeof v);
      });
    } else if (is_region_view_op(name)) {
      Kind src = c->slots[size_t(in[0])].kind;
      if (src != Kind::arg && src != Kind::view) return nullptr;
      s.kind = Kind::view;
    } else if (is_region_reduction(*n.op)) {
      std::optional<int64_t> k = detail::trailing_reduced(n.attrs, n.inputs[0].rank());
      std::optional<Reducer> r = reducer_for(name, s.dtype);
      if (!k || !r || (c->reduced_axes >= 0 && c->reduced_axes != *k)) return nullptr;
      c->reduced_axes = *k;
      s.kind = Kind::reduced;
      s.reduction = int(c->reductions.size());
      c->slots[size_t(in[0])].read = true;
      c->reductions.push_back({in[0], *r});
    } else {
      auto it = makers.find(name);
      if (it == makers.end() || !n.op->has(Trait::elementwise)) return nullptr;
      StepFn fn = it->second(n, in, out);
      if (!fn) return nullptr;
      s.kind = Kind::computed;
      bool floats = compute_size(s.dtype) == 4 && is_float(s.dtype);
      for (int v : in) {
        c->slots[size_t(v)].read = true;
        floats = floats && is_float(c->slots[size_t(v)].dtype) &&
                 compute_size(c->slots[size_t(v)].dtype) == 4;
      }
      std::vector<float> params;  // as the functors take them: the attribute rounded to f32
      for (std::string_view a : jit::attributes(name))
        params.push_back(float(n.attrs.get_float(a)));
      c->steps.push_back(
          {out, std::move(in), std::move(fn), n.op->name, floats, std::move(params)});
    }
  }
  for (const Output& o : body.outputs()) {
    Slot& s = c->slots[size_t(o.value.id)];
    if (s.kind == Kind::arg || s.kind == Kind::constant) return nullptr;
    OutputDesc d{o.value.id, s.reduction};
    if (s.kind == Kind::reduced) {
      int& out = c->reductions[size_t(s.reduction)].output;
      if (out >= 0) return nullptr;  // one value twice: not worth a special case
      out = int(c->outputs.size());
    } else {
      s.read = true;
    }
    c->outputs.push_back(d);
  }
  if (c->outputs.empty()) return nullptr;
  jit_steps(*c);
  pair_steps(*c);
  return c;
}

// Compiled bodies, per body graph (a weak reference tells a live graph from a new one
// that took a freed one's address).
std::shared_ptr<const Compiled> compiled(const SubgraphPtr& body) {
  struct Entry {
    std::weak_ptr<const Graph> graph;
    std::shared_ptr<const Compiled> code;  // null: not supported
  };
  static std::mutex mu;
  static std::unordered_map<const Graph*, Entry> cache;
  {
    std::lock_guard lock(mu);
    auto it = cache.find(body.get());
    if (it != cache.end() && it->second.graph.lock() == body) return it->second.code;
  }
  std::shared_ptr<const Compiled> code = compile(*body);
  std::lock_guard lock(mu);
  if (cache.size() > 4096)
    std::erase_if(cache, [](const auto& e) { return e.second.graph.expired(); });
  cache[body.get()] = {body, code};
  return code;
}

// ---- running it ------------------------------------------------------------------------

using Sizes = std::vector<int64_t>;

// A value's run-time shape, and for inputs and their views the strides to read it with.
struct Layout {
  Sizes shape, strides;
};

Sizes broadcast_sizes(const Sizes& a, const Sizes& b) {
  Sizes out(std::max(a.size(), b.size()), 1);
  for (size_t i = 0; i < out.size(); ++i) {
    int64_t x = i < a.size() ? a[a.size() - 1 - i] : 1;
    int64_t y = i < b.size() ? b[b.size() - 1 - i] : 1;
    out[out.size() - 1 - i] = x == 1 ? y : x;
  }
  return out;
}

// src read as `shape` under NumPy broadcasting (right-aligned; size-1 dims step by 0).
Layout align_to(const Layout& src, const Sizes& shape) {
  Layout out{shape, Sizes(shape.size(), 0)};
  int64_t lead = int64_t(shape.size()) - int64_t(src.shape.size());
  for (size_t d = 0; d < shape.size(); ++d) {
    int64_t k = int64_t(d) - lead;
    if (k >= 0 && src.shape[size_t(k)] != 1) out.strides[d] = src.strides[size_t(k)];
  }
  return out;
}

Layout expand_layout(const Layout& src, const IntList& axes) {
  int64_t rank = int64_t(src.shape.size() + axes.size());
  std::vector<bool> inserted(size_t(rank), false);
  for (int64_t a : axes) inserted[size_t(norm_axis(a, rank))] = true;
  Layout out;
  size_t k = 0;
  for (int64_t d = 0; d < rank; ++d) {
    bool ins = inserted[size_t(d)];
    out.shape.push_back(ins ? 1 : src.shape[k]);
    out.strides.push_back(ins ? 0 : src.strides[k]);
    k += !ins;
  }
  return out;
}

// The iteration space of one gathered input: size-1 dims dropped, mergeable dims merged.
ew::Space<1> space_of(const Layout& l) {
  ew::Space<1> s;
  for (size_t d = 0; d < l.shape.size(); ++d) {
    int64_t n = l.shape[d], st = l.strides[d];
    s.numel *= n;
    if (n == 1) continue;
    if (!s.shape.empty() && s.strides.back()[0] == st * n) {
      s.shape.back() *= n;
      s.strides.back() = {st};
      continue;
    }
    s.shape.push_back(n);
    s.strides.push_back({st});
  }
  if (s.shape.empty()) {
    s.shape.push_back(1);
    s.strides.push_back({});
  }
  return s;
}

using GatherFn = void (*)(const ew::Space<1>&, const void* base, int64_t t0, int64_t t1,
                          void* tile);
using FillFn = void (*)(const void* src, void* tile, int64_t n);  // one value, converted
using StoreFn = void (*)(const void* tile, void* dst, int64_t n, bool stream);

// Short runs repeated by a broadcast dim above them (a per-channel operand in the blocked
// layout: 8 or 16 lanes repeated over the pixels): each run is loaded once and copied
// along, where walking it would call load_block for every 8 elements. False otherwise.
template <class T>
bool gather_repeated(const ew::Space<1>& sp, const T* x, int64_t t0, int64_t t1, compute_t<T>* o) {
  constexpr int64_t kMaxRun = 32;
  const size_t r = sp.shape.size();
  if (r < 2 || sp.shape[r - 1] > kMaxRun || sp.strides[r - 2][0] != 0) return false;
  const int64_t len = sp.shape[r - 1], rep = sp.shape[r - 2], block = len * rep;
  compute_t<T> run[kMaxRun];
  for (int64_t i = t0; i < t1;) {
    int64_t b = i / block, off = 0;  // the block of runs i is in: its source run
    for (size_t d = r - 2; d-- > 0;) {
      off += (b % sp.shape[d]) * sp.strides[d][0];
      b /= sp.shape[d];
    }
    ew::load_block(x + off, sp.strides[r - 1][0], run, len);
    const int64_t end = std::min(t1, (i / block + 1) * block), total = end - i;
    compute_t<T>* dst = o + (i - t0);
    // One period (the run from i's place in it), then the filled part doubled.
    const int64_t at = i % len, first = std::min(len, total);
    for (int64_t k = 0; k < first; ++k) dst[k] = run[(at + k) % len];
    for (int64_t done = first; done < total;) {
      const int64_t n = std::min(done, total - done);
      std::memcpy(dst + done, dst, size_t(n) * sizeof(compute_t<T>));
      done += n;
    }
    i = end;
  }
  return true;
}

template <class T>
void gather_tile(const ew::Space<1>& sp, const void* base, int64_t t0, int64_t t1, void* tile) {
  const T* x = static_cast<const T*>(base);
  auto* o = static_cast<compute_t<T>*>(tile);
  if (gather_repeated(sp, x, t0, t1, o)) return;
  ew::walk(sp, t0, t1, [&](int64_t i, const std::array<int64_t, 1>& off, int64_t n) {
    ew::load_block(x + off[0], sp.inner()[0], o + (i - t0), n);
  });
}

template <class T>
void fill_tile(const void* src, void* tile, int64_t n) {
  compute_t<T> v = load(*static_cast<const T*>(src));
  std::fill_n(static_cast<compute_t<T>*>(tile), n, v);
}

template <class C>
void fill_compute(const void* src, void* tile, int64_t n) {
  C v;
  std::memcpy(&v, src, sizeof v);
  std::fill_n(static_cast<C*>(tile), n, v);
}

// Copies n bytes with streaming stores where dst is vector-aligned (the tail normally).
void stream_copy(const void* src, void* dst, size_t bytes) {
  auto* d = static_cast<char*>(dst);
  const auto* s = static_cast<const char*>(src);
  size_t i = 0;
#if defined(__AVX512F__)
  if ((reinterpret_cast<uintptr_t>(d) & 63) == 0)
    for (; i + 64 <= bytes; i += 64)
      _mm512_stream_si512(reinterpret_cast<__m512i*>(d + i),
                          _mm512_loadu_si512(reinterpret_cast<const void*>(s + i)));
#elif defined(__AVX__)
  if ((reinterpret_cast<uintptr_t>(d) & 31) == 0)
    for (; i + 32 <= bytes; i += 32)
      _mm256_stream_si256(reinterpret_cast<__m256i*>(d + i),
                          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i)));
#endif
  if (i < bytes) std::memcpy(d + i, s + i, bytes - i);
}

void stream_fence() {
#if defined(__AVX__)
  _mm_sfence();
#endif
}

template <class T>
void store_tile(const void* tile, void* dst, int64_t n, bool stream) {
  if constexpr (!is_half_v<T>) {
    if (stream) return stream_copy(tile, dst, size_t(n) * sizeof(T));
  }
  ew::store_block(static_cast<const compute_t<T>*>(tile), static_cast<T*>(dst), n);
}

template <template <class> class Fn, class R>
R for_storage(DType t) {
  R r{};
  visit(t, kAll, kWhere, [&](auto tag) { r = Fn<typename decltype(tag)::type>::get(); });
  return r;
}
template <class T>
struct GatherOf {
  static GatherFn get() { return gather_tile<T>; }
};
template <class T>
struct FillOf {
  static FillFn get() { return fill_tile<T>; }
};
template <class T>
struct StoreOf {
  static StoreFn get() { return store_tile<T>; }
};
FillFn fill_constant(DType t) {
  FillFn f{};
  visit_compute(t, [&](auto tag) { f = fill_compute<typename decltype(tag)::type>; });
  return f;
}

// One run of a compiled body over concrete tensors.
class Runner {
 public:
  Runner(const Compiled& c, std::span<const Tensor> in, std::span<Tensor> out)
      : c_(c), in_(in), out_(out), n_(c.slots.size()) {}

  void run() {
    layouts();
    modes();
    if (numel_ == 0) return empty_rows();
    buffers();
    chunks();
  }

 private:
  enum class Mode : uint8_t { unused, uniform, direct, gather, computed };

  const Graph& body() const { return *c_.body; }

  // The input a view (or an arg) reads.
  size_t root_arg(size_t v) const {
    while (c_.slots[v].kind == Kind::view)
      v = size_t(body().nodes()[size_t(c_.slots[v].node)].inputs[0].id);
    return size_t(c_.slots[v].arg);
  }

  // Run-time shapes of every value, strides of inputs and their views; the region shape.
  void layouts() {
    lay_.resize(n_);
    const auto& nodes = body().nodes();
    for (size_t i = 0; i < body().args().size(); ++i)
      lay_[size_t(body().args()[i].value.id)] = {in_[i].shape(), in_[i].strides()};
    for (const Node& n : nodes) {
      size_t o = size_t(n.outputs[0].id);
      const Slot& s = c_.slots[o];
      const std::string& name = n.op_name();
      if (s.kind == Kind::constant) {
        const Sizes& shape = n.attrs.get_tensor("value").shape();
        lay_[o] = {shape, Sizes(shape.size(), 0)};
      } else if (s.kind == Kind::view) {
        const Layout& src = lay_[size_t(n.inputs[0].id)];
        if (name == "expand_dims")
          lay_[o] = expand_layout(src, n.attrs.get_ints("axes"));
        else if (name == "broadcast_to")
          lay_[o] = align_to(src, n.attrs.get_ints("shape"));
        else
          lay_[o] = align_to(src, broadcast_sizes(src.shape, lay_[size_t(n.inputs[1].id)].shape));
      } else if (s.kind == Kind::computed) {
        Sizes shape;
        for (Value v : n.inputs) shape = broadcast_sizes(shape, lay_[size_t(v.id)].shape);
        lay_[o].shape = std::move(shape);
      }
    }
    const OutputDesc& first = c_.outputs[0];
    region_ = first.reduction >= 0 ? lay_[size_t(c_.reductions[size_t(first.reduction)].src)].shape
                                   : lay_[size_t(first.slot)].shape;
    numel_ = 1;
    for (int64_t d : region_) numel_ *= d;
    cols_ = 1;
    int64_t k = std::max<int64_t>(c_.reduced_axes, 0);
    for (size_t d = region_.size() - size_t(k); d < region_.size(); ++d) cols_ *= region_[d];
    rows_ = 1;
    for (size_t d = 0; d < region_.size() - size_t(k); ++d) rows_ *= region_[d];
    for (size_t i = 0; i < c_.outputs.size(); ++i) {
      const OutputDesc& o = c_.outputs[i];
      bool ok = o.reduction >= 0 ? out_[i].numel() == rows_ : out_[i].shape() == region_;
      if (!ok || !out_[i].is_contiguous())
        fail<ValueError>(kWhere, "expected output ", i, " to fit the region shape ",
                         ints_str(region_), ", got ", out_[i].type().str());
    }
  }

  // How each value gets its tile: read in place, gathered, filled once, or computed.
  void modes() {
    mode_.assign(n_, Mode::unused);
    base_.assign(n_, nullptr);
    spaces_.resize(n_);
    Sizes contiguous = contiguous_strides(region_);
    for (size_t v = 0; v < n_; ++v) {
      const Slot& s = c_.slots[v];
      if (s.kind == Kind::constant) {
        mode_[v] = Mode::uniform;
      } else if (s.kind == Kind::computed) {
        bool uniform = true;
        for (Value x : body().nodes()[size_t(s.node)].inputs)
          uniform = uniform && mode_[size_t(x.id)] == Mode::uniform;
        mode_[v] = uniform ? Mode::uniform : Mode::computed;
      } else if ((s.kind == Kind::arg || s.kind == Kind::view) && s.read) {
        Layout l = align_to(lay_[v], region_);
        size_t arg = root_arg(v);
        base_[v] = in_[arg].data();
        bool zero = true, dense = true;
        for (size_t d = 0; d < region_.size(); ++d) {
          zero = zero && (region_[d] == 1 || l.strides[d] == 0);
          dense = dense && (region_[d] == 1 || l.strides[d] == contiguous[d]);
        }
        bool aliased = false;
        for (const Tensor& o : out_) aliased = aliased || o.buffer() == in_[arg].buffer();
        if (zero) {
          mode_[v] = Mode::uniform;
        } else if (dense && computes_in_place(s.dtype) && !aliased) {
          mode_[v] = Mode::direct;
        } else {
          mode_[v] = Mode::gather;
          spaces_[v] = space_of(l);
        }
      }
    }
  }

  // Tile buffers: one per uniform or gathered value; computed values share buffers, each
  // freed once its last reader has run (outputs and folds read at the end of the tile).
  void buffers() {
    buf_.assign(n_, -1);
    // A step runs once in the prologue when every value it writes is uniform.
    for (const Step& st : c_.steps) {
      bool uniform = mode_[size_t(st.out)] == Mode::uniform;
      for (int v : st.more_out) uniform = uniform && mode_[size_t(v)] == Mode::uniform;
      (uniform ? prologue_ : main_).push_back(&st);
    }
    int next = 0;
    for (size_t v = 0; v < n_; ++v)
      if (mode_[v] == Mode::gather || (mode_[v] == Mode::uniform && c_.slots[v].read))
        buf_[v] = next++;
    for (const Step* st : prologue_) {
      if (buf_[size_t(st->out)] < 0) buf_[size_t(st->out)] = next++;
      for (int v : st->more_out)
        if (buf_[size_t(v)] < 0) buf_[size_t(v)] = next++;
    }
    size_t end = main_.size();
    std::vector<size_t> last(n_, 0);
    for (size_t i = 0; i < main_.size(); ++i) {
      last[size_t(main_[i]->out)] = i;  // a value nothing reads is free at once
      for (int v : main_[i]->more_out) last[size_t(v)] = i;
      for (int x : main_[i]->in) last[size_t(x)] = i;
    }
    for (const OutputDesc& o : c_.outputs) last[size_t(o.slot)] = end;
    for (const ReductionDesc& r : c_.reductions) last[size_t(r.src)] = end;
    std::vector<int> free;
    auto release = [&](size_t v, size_t i) {
      if (mode_[v] == Mode::computed && last[v] == i &&
          std::find(free.begin(), free.end(), buf_[v]) == free.end())
        free.push_back(buf_[v]);
    };
    for (size_t i = 0; i < main_.size(); ++i) {
      // Every value the step writes gets a buffer before any of its inputs' is freed: a
      // step never writes a buffer it reads.
      auto take = [&](size_t v) {
        if (free.empty()) {
          buf_[v] = next++;
        } else {
          buf_[v] = free.back();
          free.pop_back();
        }
      };
      take(size_t(main_[i]->out));
      for (int v : main_[i]->more_out) take(size_t(v));
      for (int x : main_[i]->in) release(size_t(x), i);
      release(size_t(main_[i]->out), i);
      for (int v : main_[i]->more_out) release(size_t(v), i);
    }
    num_buffers_ = next;
    gather_.assign(n_, nullptr);
    elem_size_.assign(n_, 0);
    for (size_t v = 0; v < n_; ++v) {
      elem_size_[v] = int64_t(compute_size(c_.slots[v].dtype));
      if (mode_[v] == Mode::direct) direct_.push_back(v);
      if (mode_[v] != Mode::gather) continue;
      gathered_.push_back(v);
      gather_[v] = for_storage<GatherOf, GatherFn>(c_.slots[v].dtype);
    }
  }

  // Reductions over rows of zero elements: every row is the fold of nothing.
  void empty_rows() {
    for (size_t i = 0; i < c_.outputs.size(); ++i) {
      const OutputDesc& o = c_.outputs[i];
      if (o.reduction < 0) continue;
      const Reducer& r = c_.reductions[size_t(o.reduction)].fns;
      Acc a;
      r.init(a);
      for (int64_t row = 0; row < rows_; ++row) r.finish(a, cols_, out_[i].data(), row);
    }
  }

  struct Partial {
    int64_t row;
    Acc acc;
  };

  void chunks() {
    int64_t threads = threads_here();
    int64_t chunks = std::clamp<int64_t>((numel_ + kGrain - 1) / kGrain, 1, threads);
    std::vector<int64_t> bounds(size_t(chunks) + 1);
    bool by_rows = !c_.reductions.empty() && rows_ >= chunks;
    for (int64_t i = 0; i <= chunks; ++i) {
      if (by_rows) {
        bounds[size_t(i)] = rows_ * i / chunks * cols_;
      } else {
        int64_t b = numel_ * i / chunks;
        bounds[size_t(i)] = i == chunks ? numel_ : b / kTile * kTile;
      }
    }
    stream_ = false;
    for (size_t i = 0; i < c_.outputs.size(); ++i)
      stream_ =
          stream_ || (c_.outputs[i].reduction < 0 && int64_t(out_[i].nbytes()) >= kStreamBytes);
    prefetch_.clear();
    for (size_t v : direct_)
      if (int64_t(in_[root_arg(v)].nbytes()) >= kStreamBytes) prefetch_.push_back(v);
    generated_run(by_rows);
    partials_.assign(size_t(chunks) * c_.reductions.size(), {});
    parallel_for(chunks, 1, [&](int64_t c0, int64_t c1) {
      for (int64_t ch = c0; ch < c1; ++ch) chunk(ch, bounds[size_t(ch)], bounds[size_t(ch) + 1]);
    });
    combine_partials();
  }

  // A body that is one generated run writes the region's f32 outputs straight to their
  // tensors instead of through a tile, with streaming stores where the outputs stream (and
  // every tile starts 64-byte aligned in them).
  void generated_run(bool by_rows) {
    run_ = main_.size() == 1 && main_[0]->code.plain ? main_[0] : nullptr;
    run_fn_ = nullptr;
    direct_out_.assign(c_.outputs.size(), false);
    if (!run_) return;
    std::vector<int> written = run_->more_out;
    written.push_back(run_->out);
    bool aligned = stream_ && !by_rows;
    for (size_t i = 0; i < c_.outputs.size(); ++i) {
      const OutputDesc& o = c_.outputs[i];
      if (o.reduction >= 0 || out_[i].dtype() != DType::f32 ||
          std::find(written.begin(), written.end(), o.slot) == written.end())
        continue;
      int times = 0;
      for (const OutputDesc& x : c_.outputs) times += x.reduction < 0 && x.slot == o.slot;
      if (times != 1) continue;
      direct_out_[i] = true;
      aligned = aligned && reinterpret_cast<uintptr_t>(out_[i].data()) % 64 == 0;
    }
    run_fn_ = aligned ? run_->code.stream : run_->code.plain;
  }

  void chunk(int64_t index, int64_t b, int64_t e) {
    if (b >= e) return;
    size_t stride = size_t(kTile) * 8;  // bytes per tile buffer (8: the widest compute type)
    std::unique_ptr<char[]> mem(new char[size_t(num_buffers_) * stride + 64]);
    char* base =
        reinterpret_cast<char*>((reinterpret_cast<uintptr_t>(mem.get()) + 63) & ~uintptr_t(63));
    std::vector<void*> p(n_, nullptr);
    for (size_t v = 0; v < n_; ++v)
      if (buf_[v] >= 0) p[v] = base + size_t(buf_[v]) * stride;
    // Values the same everywhere: filled (inputs, constants) and computed once.
    for (size_t v = 0; v < n_; ++v) {
      if (mode_[v] != Mode::uniform || buf_[v] < 0) continue;
      const Slot& s = c_.slots[v];
      if (s.kind == Kind::constant)
        fill_constant(s.dtype)(s.value.data(), p[v], kTile);
      else if (s.kind != Kind::computed)
        for_storage<FillOf, FillFn>(s.dtype)(base_[v], p[v], kTile);
    }
    for (const Step* st : prologue_) st->fn(p.data(), kTile);

    std::vector<int64_t> cur(c_.reductions.size(), -1);
    std::vector<Acc> acc(c_.reductions.size());
    std::vector<StoreFn> stores;
    for (size_t i = 0; i < c_.outputs.size(); ++i)
      stores.push_back(c_.outputs[i].reduction < 0 ? for_storage<StoreOf, StoreFn>(out_[i].dtype())
                                                   : nullptr);
    for (int64_t t0 = b; t0 < e; t0 += kTile) {
      int64_t t1 = std::min(e, t0 + kTile), n = t1 - t0;
      for (size_t v : direct_)
        p[v] = static_cast<char*>(const_cast<void*>(base_[v])) + t0 * elem_size_[v];
      for (size_t v : gathered_) gather_[v](spaces_[v], base_[v], t0, t1, p[v]);
      for (size_t i = 0; i < c_.outputs.size(); ++i)
        if (direct_out_[i])
          p[size_t(c_.outputs[i].slot)] = static_cast<char*>(out_[i].data()) + t0 * 4;
      // Large inputs read in place: the next tile is prefetched a slice before each step,
      // so memory works while the steps compute (a burst would wait on fill buffers).
      int64_t ahead = std::min(kTile, e - t1);
      size_t steps = run_ ? size_t(kSlices) : std::max<size_t>(main_.size(), 1);
      for (size_t k = 0; k < steps; ++k) {
        for (size_t v : prefetch_) {
          const char* next = static_cast<const char*>(p[v]) + kTile * elem_size_[v];
          int64_t bytes = ahead * elem_size_[v];
          for (int64_t off = bytes * int64_t(k) / int64_t(steps) / 64 * 64,
                       end = bytes * int64_t(k + 1) / int64_t(steps);
               off < end; off += 64)
            __builtin_prefetch(next + off, 0, 3);
        }
        if (run_) {
          auto at = [&](size_t j) { return j == steps ? n : n * int64_t(j) / kSlices / 16 * 16; };
          run_fn_(p.data(), at(k), at(k + 1));
        } else if (k < main_.size()) {
          main_[k]->fn(p.data(), n);
        }
      }
      for (size_t i = 0; i < c_.outputs.size(); ++i) {
        const OutputDesc& o = c_.outputs[i];
        if (o.reduction >= 0 || direct_out_[i]) continue;
        char* dst = static_cast<char*>(out_[i].data()) + t0 * int64_t(dtype_size(out_[i].dtype()));
        stores[i](p[size_t(o.slot)], dst, n, stream_);
      }
      for (size_t r = 0; r < c_.reductions.size(); ++r)
        if (c_.reductions[r].output >= 0)
          fold_tile(r, p[size_t(c_.reductions[r].src)], t0, t1, b, index, cur[r], acc[r]);
    }
    for (size_t r = 0; r < c_.reductions.size(); ++r)
      if (cur[r] >= 0)
        partials_[size_t(index) * c_.reductions.size() + r].push_back({cur[r], acc[r]});
    if (stream_) stream_fence();
  }

  // Folds the tile's segment of each row into the row's accumulator; a row finished in
  // this chunk that also started in it is written out, others are kept as partials.
  void fold_tile(size_t r, const void* src, int64_t t0, int64_t t1, int64_t b, int64_t index,
                 int64_t& cur, Acc& acc) {
    const ReductionDesc& red = c_.reductions[r];
    int64_t es = elem_size_[size_t(red.src)];
    void* out = out_[size_t(red.output)].data();
    for (int64_t pos = t0; pos < t1;) {
      int64_t row = pos / cols_, row_end = (row + 1) * cols_, seg = std::min(t1, row_end);
      if (row != cur) {
        cur = row;
        red.fns.init(acc);
      }
      red.fns.fold(static_cast<const char*>(src) + (pos - t0) * es, seg - pos, acc);
      if (seg == row_end) {
        if (row * cols_ >= b)
          red.fns.finish(acc, cols_, out, row);
        else
          partials_[size_t(index) * c_.reductions.size() + r].push_back({row, acc});
        cur = -1;
      }
      pos = seg;
    }
  }

  // Rows split between chunks: their pieces, combined in chunk order.
  void combine_partials() {
    size_t nr = c_.reductions.size();
    for (size_t r = 0; r < nr; ++r) {
      const Reducer& fns = c_.reductions[r].fns;
      int64_t row = -1;
      Acc acc;
      auto flush = [&] {
        if (row >= 0) fns.finish(acc, cols_, out_[size_t(c_.reductions[r].output)].data(), row);
      };
      for (size_t ch = 0; ch * nr < partials_.size(); ++ch)
        for (const Partial& part : partials_[ch * nr + r]) {
          if (part.row != row) {
            flush();
            row = part.row;
            fns.init(acc);
          }
          fns.combine(acc, part.acc);
        }
      flush();
    }
  }

  const Compiled& c_;
  std::span<const Tensor> in_;
  std::span<Tensor> out_;
  size_t n_;
  std::vector<Layout> lay_;
  Sizes region_;
  int64_t numel_ = 0, rows_ = 1, cols_ = 1;
  std::vector<Mode> mode_;
  std::vector<const void*> base_;
  std::vector<ew::Space<1>> spaces_;
  std::vector<GatherFn> gather_;
  std::vector<size_t> direct_, gathered_;  // values read in place / gathered, per tile
  std::vector<size_t> prefetch_;           // direct values large enough to prefetch
  std::vector<int64_t> elem_size_;         // per value: bytes of its compute type
  std::vector<int> buf_;
  std::vector<const Step*> prologue_, main_;
  const Step* run_ = nullptr;     // the one main step, a generated run
  jit::RunFn run_fn_ = nullptr;   // its variant for this run
  std::vector<bool> direct_out_;  // per output: written in place by run_
  int num_buffers_ = 0;
  bool stream_ = false;
  std::vector<std::vector<Partial>> partials_;
};

void region_kernel(const KernelContext& ctx, std::span<const Tensor> in, std::span<Tensor> out) {
  if (ctx.graphs.size() != 1 || !ctx.graphs[0])
    fail<ValueError>(kWhere, "expected the node's body graph, got ", ctx.graphs.size(), " graphs");
  std::shared_ptr<const Compiled> code = compiled(ctx.graphs[0]);
  if (!code)
    fail<NotSupported>(kWhere, "expected a body the CPU interpreter runs, got an unsupported op");
  Runner(*code, in, out).run();
}

bool region_supported(const KernelQuery& q) {
  return q.subgraphs.size() == 1 && q.subgraphs[0] && compiled(q.subgraphs[0]) != nullptr;
}

}  // namespace

void register_region(KernelRegistry& r) {
  add_kernel(r, std::string(detail::kRegionOp), region_kernel, region_supported,
             {.strided_inputs = true});
}

}  // namespace RLX_ISA_NS
}  // namespace rlx::cpu
