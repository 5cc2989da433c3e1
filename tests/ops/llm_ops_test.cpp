// The LLM ops beyond what the op tables express: kv_cache_write's in-place update through
// a compiled Session, decode (cache filled step by step) against one prefill, the
// decompositions other devices run against the CPU kernels, and sample's statistics
// (greedy, top-k, top-p, min-p, temperature, penalties, reproducibility). The inference
// cases of the family (tests/op_tables/cases_llm.cpp) run here too.
#include <gtest/gtest.h>
#include <omp.h>

#include <bit>
#include <cmath>
#include <map>
#include <numeric>
#include <set>

#include "op_tables/consistency.h"
#include "op_tables/infer_harness.h"
#include "rlx/rlx.h"
#include "rlx/session.h"
#include "rlx/text.h"
#include "rlx/verify.h"

namespace rlx {
namespace {

using test::random_tensor;
using test::tensor_of;
using test::values;
using Tensors = std::vector<Tensor>;

// ---- inference cases -------------------------------------------------------------------

class LlmInfer : public ::testing::TestWithParam<testing::InferCase> {};
TEST_P(LlmInfer, Case) { testing::run_infer_case(GetParam()); }
INSTANTIATE_TEST_SUITE_P(llm, LlmInfer, ::testing::ValuesIn(testing::llm_cases()),
                         [](const ::testing::TestParamInfo<testing::InferCase>& info) {
                           std::string s = info.param.op + "_" + std::to_string(info.index);
                           for (char& ch : s)
                             if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return s;
                         });

// The ok cases' graphs verify and survive the text format (as tests/ir does for every
// family; here on their own, so that another family's failure does not hide them).
TEST(LlmGraphs, OkCasesVerifyAndRoundTripThroughText) {
  int n = 0;
  for (const testing::InferCase& c : testing::llm_cases()) {
    if (c.expect != testing::Expect::ok) continue;
    SCOPED_TRACE(testing::case_label(c));
    std::unique_ptr<Graph> g = testing::build_case_graph(c);
    EXPECT_NO_THROW(verify(*g));
    std::string text = print_graph(*g);
    std::unique_ptr<Graph> back = parse_graph(text);
    EXPECT_EQ(print_graph(*back), text);
    ++n;
  }
  EXPECT_GT(n, 10);
}

// ---- helpers -----------------------------------------------------------------------------

Tensor i32(std::vector<int64_t> shape, std::vector<int32_t> v) {
  return Tensor::from_vector(v, std::move(shape));
}

// The one-node graph of `op` over inputs of these types, compiled for the CPU.
CompiledGraph compile_op(const std::string& op, const std::vector<TensorType>& types,
                         const Attrs& attrs = {}) {
  Graph g("op");
  std::vector<Value> ins;
  for (size_t i = 0; i < types.size(); ++i) ins.push_back(g.input(str_cat("x", i), types[i]));
  for (Value v : g.apply(op, ins, attrs)) g.output(v);
  return Session(Device::cpu()).compile(g);
}

std::vector<TensorType> types_of(const Tensors& ts) {
  std::vector<TensorType> t;
  for (const Tensor& x : ts) t.push_back(x.type());
  return t;
}

Tensors run_op(const std::string& op, const Tensors& in, const Attrs& attrs = {}) {
  return compile_op(op, types_of(in), attrs).run(std::span<const Tensor>(in));
}

// The op's decomposition (what a device without its kernel runs), compiled for the CPU.
Tensors run_decomposed(const std::string& op, const Tensors& in, const Attrs& attrs = {}) {
  const OpDef& def = OpRegistry::global().get(op);
  Graph g("decomposed");
  std::vector<Value> ins;
  for (size_t i = 0; i < in.size(); ++i) ins.push_back(g.input(str_cat("x", i), in[i].type()));
  Attrs full = validate_attrs(def, attrs);
  for (Value v : def.decompose(RuleArgs{g, full, ins, {}, {}, &def})) g.output(v);
  return Session(Device::cpu()).compile(g).run(std::span<const Tensor>(in));
}

double max_abs_diff(const Tensor& a, const Tensor& b) {
  auto x = values(a), y = values(b);
  EXPECT_EQ(x.size(), y.size());
  double m = 0;
  for (size_t i = 0; i < x.size() && i < y.size(); ++i) m = std::max(m, std::abs(x[i] - y[i]));
  return m;
}

// ---- kv_cache_write ---------------------------------------------------------------------

TEST(KvCacheWrite, WritesInPlaceThroughACompiledSession) {
  const int64_t kvh = 2, c = 8, d = 4;
  Graph g("cache");
  Value cache = g.input("cache", {DType::f16, {1, kvh, c, d}});
  Value nw = g.input("new", {DType::f32, {Dim(1), Dim::sym("s"), Dim(kvh), Dim(d)}});
  Value pos = g.input("pos", {DType::i32, {1}});
  g.output(op("kv_cache_write", {cache, nw, pos}), "out");
  CompiledGraph cg = Session(Device::cpu()).compile(g);

  Tensor kc = Tensor::zeros(DType::f16, {1, kvh, c, d});
  // Values that f16 holds exactly, so the rows compare equal.
  Tensor a = Tensor::from_doubles(DType::f32, {1, 3, kvh, d},
                                  values(random_tensor(DType::f16, {1, 3, kvh, d}, 1)));
  Tensor b = Tensor::from_doubles(DType::f32, {1, 1, kvh, d},
                                  values(random_tensor(DType::f16, {1, 1, kvh, d}, 2)));
  TensorMap out = cg.run({{"cache", kc}, {"new", a}, {"pos", i32({1}, {0})}});
  EXPECT_EQ(out.at("out").data(), kc.data()) << "the output is not the cache's storage";
  out = cg.run({{"cache", kc}, {"new", b}, {"pos", i32({1}, {3})}});
  EXPECT_EQ(out.at("out").data(), kc.data());
  // The caller's tensor holds both writes: rows 0..2 from a, row 3 from b, the rest zero.
  auto got = values(kc), va = values(a), vb = values(b);
  for (int64_t h = 0; h < kvh; ++h)
    for (int64_t r = 0; r < c; ++r)
      for (int64_t e = 0; e < d; ++e) {
        double want = r < 3    ? va[size_t((r * kvh + h) * d + e)]
                      : r == 3 ? vb[size_t(h * d + e)]
                               : 0.0;
        EXPECT_EQ(got[size_t((h * c + r) * d + e)], want) << "head " << h << " row " << r;
      }
}

TEST(KvCacheWrite, OutOfRangeIsAValueErrorNamingPosSAndC) {
  Tensors in{Tensor::zeros(DType::f32, {2, 1, 6, 2}), Tensor::zeros(DType::f32, {2, 3, 1, 2}),
             i32({2}, {0, 4})};
  try {
    run_op("kv_cache_write", in);
    FAIL() << "expected a ValueError";
  } catch (const ValueError& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("[kv_cache_write]"), std::string::npos) << m;
    EXPECT_NE(m.find("C = 6"), std::string::npos) << m;
    EXPECT_NE(m.find("pos[1] = 4"), std::string::npos) << m;
    EXPECT_NE(m.find("S = 3"), std::string::npos) << m;
  }
}

TEST(KvCacheWrite, DecompositionMatchesTheKernel) {
  Tensor cache = random_tensor(DType::bf16, {2, 3, 9, 5}, 3);
  Tensors in{cache.clone(), random_tensor(DType::f32, {2, 4, 3, 5}, 4), i32({2}, {5, 0})};
  Tensor functional = run_decomposed("kv_cache_write", in)[0];
  EXPECT_EQ(values(in[0]), values(cache)) << "the decomposition wrote into its input";
  Tensor inplace = run_op("kv_cache_write", in)[0];
  EXPECT_EQ(values(functional), values(inplace));
}

// ---- attention_cached -------------------------------------------------------------------

Tensor slice_seq(const Tensor& x, int64_t from, int64_t n) {  // [B, S, ...] rows from..from+n
  std::vector<int64_t> shape = x.shape();
  int64_t inner = 1;
  for (size_t i = 2; i < shape.size(); ++i) inner *= shape[i];
  auto v = values(x);
  std::vector<double> out;
  for (int64_t b = 0; b < shape[0]; ++b)
    for (int64_t s = from; s < from + n; ++s)
      out.insert(out.end(), v.begin() + (b * shape[1] + s) * inner,
                 v.begin() + (b * shape[1] + s + 1) * inner);
  shape[1] = n;
  return Tensor::from_doubles(x.dtype(), shape, out);
}

// The step graph of a decoder layer's attention: both caches written, then read.
CompiledGraph attention_step(int64_t b, int64_t h, int64_t kvh, int64_t c, int64_t d, DType cache) {
  Graph g("step");
  Dim s = Dim::sym("s");
  Value kc = g.input("kc", {cache, {b, kvh, c, d}});
  Value vc = g.input("vc", {cache, {b, kvh, c, d}});
  Value q = g.input("q", {DType::f32, {Dim(b), s, Dim(h), Dim(d)}});
  Value k = g.input("k", {DType::f32, {Dim(b), s, Dim(kvh), Dim(d)}});
  Value v = g.input("v", {DType::f32, {Dim(b), s, Dim(kvh), Dim(d)}});
  Value pos = g.input("pos", {DType::i32, {b}});
  Value kw = op("kv_cache_write", {kc, k, pos});
  Value vw = op("kv_cache_write", {vc, v, pos});
  g.output(op("attention_cached", {q, kw, vw, pos}), "y");
  return Session(Device::cpu()).compile(g);
}

TEST(AttentionCached, DecodeAfterPrefillEqualsOnePrefill) {
  const int64_t b = 2, h = 4, kvh = 2, c = 16, d = 16, t = 11, first = 4;
  for (DType cache : {DType::f16, DType::f32}) {
    SCOPED_TRACE(dtype_name(cache));
    CompiledGraph cg = attention_step(b, h, kvh, c, d, cache);
    Tensor q = random_tensor(DType::f32, {b, t, h, d}, 10);
    Tensor k = random_tensor(DType::f32, {b, t, kvh, d}, 11);
    Tensor v = random_tensor(DType::f32, {b, t, kvh, d}, 12);
    auto fresh = [&] { return Tensor::full(cache, {b, kvh, c, d}, std::nan("")); };
    Tensor kc = fresh(), vc = fresh();
    Tensor whole =
        cg.run({{"kc", kc}, {"vc", vc}, {"q", q}, {"k", k}, {"v", v}, {"pos", i32({b}, {0, 0})}})
            .at("y");
    // Again from empty caches: a prefill of `first` tokens, then one token per step.
    kc = fresh();
    vc = fresh();
    auto step = [&](int64_t from, int64_t n) {
      int32_t p = int32_t(from);
      return cg
          .run({{"kc", kc},
                {"vc", vc},
                {"q", slice_seq(q, from, n)},
                {"k", slice_seq(k, from, n)},
                {"v", slice_seq(v, from, n)},
                {"pos", i32({b}, {p, p})}})
          .at("y");
    };
    EXPECT_LT(max_abs_diff(step(0, first), slice_seq(whole, 0, first)), 1e-6);
    for (int64_t i = first; i < t; ++i)
      EXPECT_LT(max_abs_diff(step(i, 1), slice_seq(whole, i, 1)), 1e-6) << "token " << i;
  }
}

TEST(AttentionCached, DecompositionMatchesTheKernel) {
  // f32 queries over an f16 cache whose rows past the queries are NaN.
  Tensor kc = random_tensor(DType::f16, {2, 2, 70, 16}, 20),
         vc = random_tensor(DType::f16, {2, 2, 70, 16}, 21);
  auto nan_tail = [](Tensor t, std::vector<int64_t> from) {
    auto v = values(t);
    const auto& s = t.shape();
    for (int64_t b = 0; b < s[0]; ++b)
      for (int64_t h = 0; h < s[1]; ++h)
        for (int64_t j = from[size_t(b)]; j < s[2]; ++j)
          for (int64_t e = 0; e < s[3]; ++e)
            v[size_t(((b * s[1] + h) * s[2] + j) * s[3] + e)] = std::nan("");
    return Tensor::from_doubles(t.dtype(), s, v);
  };
  Tensors in{random_tensor(DType::f32, {2, 3, 6, 16}, 22), nan_tail(kc, {68, 12}),
             nan_tail(vc, {68, 12}), i32({2}, {65, 9})};
  Tensor kernel = run_op("attention_cached", in)[0];
  Tensor decomposed = run_decomposed("attention_cached", in)[0];
  for (double x : values(kernel)) ASSERT_TRUE(std::isfinite(x));
  EXPECT_LT(max_abs_diff(kernel, decomposed), 2e-6);
}

// ---- attention_cached in llama.cpp's order of additions --------------------------------
// The CPU kernel sums as ggml's CPU attention does (greedy parity with llama.cpp on
// quantized models needs the same bits): this scalar statement of ggml's orders, written
// from ggml's kernels, must give exactly its outputs, in the AVX-512 form (16 lanes) or the
// AVX2 one (8), whichever level the kernels run at (rlx::cpu_isa(); a native build's is this
// file's -march).
struct GgmlForm {
  int lanes;  // 16: AVX-512, 8: AVX2, 0: neither (the kernels keep their own order)
};

GgmlForm kernels_form() {
  switch (cpu_isa()) {
    case CpuIsa::avx512:
      return {16};
    case CpuIsa::avx2:
      return {8};
    case CpuIsa::baseline:
      return {0};
    case CpuIsa::native:
      break;
  }
#if defined(__AVX512F__)
  return {16};
#elif defined(__AVX2__) && defined(__FMA__)
  return {8};
#else
  return {0};
#endif
}

// ggml's vectorised expf, one lane; its AVX-512 and AVX2 forms round differently.
float ggml_exp(float x, GgmlForm f) {
  const float r = 0x1.8p23f, z = std::fma(x, 0x1.715476p+0f, r), n = z - r;
  const float b = std::fma(-n, 0x1.7f7d1cp-20f, std::fma(-n, 0x1.62e4p-1f, x)), u = b * b;
  const float p = std::fma(std::fma(0x1.0e4020p-7f, b, 0x1.573e2ep-5f), u,
                           std::fma(0x1.555e66p-3f, b, 0x1.fffdb6p-2f));
  if (f.lanes == 16) {
    if (std::fabs(n) > 192) return n <= 0 ? 0.f : INFINITY;
    return std::ldexp(std::fma(p, u, std::fma(0x1.ffffecp-1f, b, 1.f)), int(n));
  }
  const float j = std::fma(p, u, 0x1.ffffecp-1f * b);
  const uint32_t e = std::bit_cast<uint32_t>(z) << 23;
  if (std::fabs(n) <= 126) {
    const float k = std::bit_cast<float>(e + std::bit_cast<uint32_t>(1.f));
    return std::fma(j, k, k);
  }
  const uint32_t g = n <= 0 ? 0x82000000u : 0u;
  const float s1 = std::bit_cast<float>(g + 0x7f000000u), s2 = std::bit_cast<float>(e - g);
  return std::fabs(n) > 192 ? s1 * s1 : std::fma(s2, j, s2) * s1;
}

float halving(std::vector<float> c) {
  for (size_t h = c.size() / 2; h >= 1; h /= 2)
    for (size_t l = 0; l < h; ++l) c[l] += c[l + h];
  return c[0];
}

// ggml_vec_dot_f32 / _f16 (Half: the tail in double) over x[i * sx], y[i * sy].
float ggml_vec_dot(const float* x, int64_t sx, const float* y, int64_t n, bool half, GgmlForm f) {
  const int L = f.lanes;
  std::vector<float> a(size_t(4 * L), 0.f), c(static_cast<size_t>(L));
  int64_t i = 0;
  for (; i + 4 * L <= n; i += 4 * L)
    for (int t = 0; t < 4 * L; ++t)
      a[size_t(t)] = std::fma(x[(i + t) * sx], y[i + t], a[size_t(t)]);
  for (int l = 0; l < L; ++l)
    c[size_t(l)] =
        (a[size_t(l)] + a[size_t(2 * L + l)]) + (a[size_t(L + l)] + a[size_t(3 * L + l)]);
  float s;
  if (L == 16) {
    s = halving(c);
  } else {  // two hadds after the halves
    for (int l = 0; l < 4; ++l) c[size_t(l)] += c[size_t(l + 4)];
    s = (c[0] + c[1]) + (c[2] + c[3]);
  }
  double sd = s;
  for (; i < n; ++i) {
    if (half)
      sd += double(x[i * sx] * y[i]);
    else
      s = std::fma(x[i * sx], y[i], s);
  }
  return half ? float(sd) : s;
}

// llamafile's sgemm: one accumulator of L lanes, then the halving; n % L == 0.
float ggml_sgemm_dot(const float* x, int64_t sx, const float* y, int64_t n, GgmlForm f) {
  std::vector<float> a(size_t(f.lanes), 0.f);
  for (int64_t i = 0; i < n; ++i)
    a[size_t(i % f.lanes)] = std::fma(x[i * sx], y[i], a[size_t(i % f.lanes)]);
  return halving(a);
}

// attention_cached(q [B, S, H, D] f32 holding values of the cache's type, caches
// [B, KVH, C, D], pos [B]) as ggml computes it.
std::vector<float> ggml_attention(const Tensor& q, const Tensor& kc, const Tensor& vc,
                                  const std::vector<int64_t>& pos, GgmlForm f) {
  const int64_t B = q.shape()[0], S = q.shape()[1], H = q.shape()[2], D = q.shape()[3];
  const int64_t KVH = kc.shape()[1], C = kc.shape()[2], G = H / KVH;
  const bool half = kc.dtype() == DType::f16;
  auto to_f = [](const Tensor& t) {
    std::vector<float> v;
    for (double x : values(t)) v.push_back(float(x));
    return v;
  };
  const std::vector<float> qv = to_f(q), kv = to_f(kc), vv = to_f(vc);
  const float scale = float(1.0 / std::sqrt(double(D)));
  const int L = f.lanes;
  std::vector<float> y(size_t(B * S * H * D));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t si = 0; si < S; ++si)
      for (int64_t h = 0; h < H; ++h) {
        const int64_t keys = pos[size_t(b)] + S, nv = pos[size_t(b)] + si + 1;
        const int64_t n_kv = std::min(C, std::max<int64_t>(256, (keys + 255) / 256 * 256));
        const float* qr = &qv[size_t(((b * S + si) * H + h) * D)];
        const float* kb = &kv[size_t((b * KVH + h / G) * C * D)];
        const float* vb = &vv[size_t((b * KVH + h / G) * C * D)];
        const bool sgemm_scores = half && S >= 2 && D % L == 0 && n_kv % 4 == 0;
        std::vector<float> p(static_cast<size_t>(nv));
        float mx = -INFINITY;
        for (int64_t j = 0; j < nv; ++j) {
          const float dot = sgemm_scores ? ggml_sgemm_dot(kb + j * D, 1, qr, D, f)
                                         : ggml_vec_dot(kb + j * D, 1, qr, D, half, f);
          p[size_t(j)] = dot * scale;
          mx = std::max(mx, p[size_t(j)]);
        }
        double total = 0;  // vectors of L lanes, each summed by halving, added in double
        for (int64_t j0 = 0; j0 < nv; j0 += L) {
          std::vector<float> e(static_cast<size_t>(L), 0.f);
          for (int64_t j = j0; j < std::min(nv, j0 + L); ++j)
            e[size_t(j - j0)] = p[size_t(j)] = ggml_exp(p[size_t(j)] - mx, f);
          total += double(halving(e));
        }
        const float inv = float(1.0 / total);
        std::vector<double> pd;
        for (float& x : p) pd.push_back(double(x * inv));
        if (half) pd = values(tensor_of(DType::f16, {nv}, pd));
        for (int64_t j = 0; j < nv; ++j) p[size_t(j)] = float(pd[size_t(j)]);
        const bool sgemm_values = S >= 2 && n_kv % L == 0 && D % 4 == 0;
        float* out = &y[size_t(((b * S + si) * H + h) * D)];
        for (int64_t e = 0; e < D; ++e) {
          if (sgemm_values) {
            out[e] = ggml_sgemm_dot(vb + e, D, p.data(), nv, f);
          } else {  // ggml_vec_dot over n_kv keys, the masked ones zero
            std::vector<float> pz(size_t(n_kv), 0.f);
            std::copy(p.begin(), p.end(), pz.begin());
            const int64_t lanes_end = n_kv / (4 * L) * (4 * L), in_lanes = std::min(nv, lanes_end);
            float s = ggml_vec_dot(vb + e, D, pz.data(), lanes_end, half, f);
            double sd = s;
            for (int64_t j = in_lanes; j < nv; ++j) {
              if (half)
                sd += double(vb[j * D + e] * p[size_t(j)]);
              else
                s = std::fma(vb[j * D + e], p[size_t(j)], s);
            }
            out[e] = half ? float(sd) : s;
          }
        }
      }
  return y;
}

TEST(AttentionCached, SumsInLlamaCppsOrder) {
  const GgmlForm form = kernels_form();
  if (!form.lanes) GTEST_SKIP() << "kernels built without AVX2 / FMA: they keep their own order";
  struct Case {
    int64_t s, d, c, pos;
  };
  // Decode and prefill, head sizes with and without ggml_vec_dot's tail (64, 40), caches
  // whose n_kv is 256 or the whole (odd) cache.
  const Case cases[] = {{1, 64, 300, 5},    {1, 64, 300, 270}, {1, 40, 256, 100}, {24, 64, 300, 0},
                        {20, 64, 300, 250}, {24, 40, 300, 3},  {3, 64, 256, 30}};
  // The kernel splits the rows into more tasks the more threads it has (one query row each
  // at 16): every split keeps llama.cpp's order, whose n_kv is the whole batch's.
  struct Restore {
    int threads = omp_get_max_threads();
    ~Restore() { omp_set_num_threads(threads); }
  } restore;
  for (int nt : {2, 16})
    for (DType cache : {DType::f32, DType::f16})
      for (const Case& k : cases) {
        omp_set_num_threads(nt);
        SCOPED_TRACE(str_cat(nt, " threads, ", dtype_name(cache), " S ", k.s, " D ", k.d, " C ",
                             k.c, " pos ", k.pos));
        const int64_t H = 4, KVH = 2;
        // Queries hold values of the cache's type (ggml rounds them to it first).
        Tensor q = tensor_of(DType::f32, {1, k.s, H, k.d},
                             values(random_tensor(cache, {1, k.s, H, k.d}, 40, -1, 1)));
        Tensor kc = random_tensor(cache, {1, KVH, k.c, k.d}, 41, -1, 1);
        Tensor vc = random_tensor(cache, {1, KVH, k.c, k.d}, 42, -1, 1);
        const std::vector<double> got =
            values(run_op("attention_cached", {q, kc, vc, i32({1}, {int32_t(k.pos)})})[0]);
        const std::vector<float> want = ggml_attention(q, kc, vc, {k.pos}, form);
        ASSERT_EQ(got.size(), want.size());
        int64_t differ = 0;
        for (size_t i = 0; i < got.size(); ++i) differ += float(got[i]) != want[i];
        EXPECT_EQ(differ, 0) << "outputs not ggml's to the bit, of " << got.size();
      }
}

TEST(Swiglu, RoundsAsLlamaCpp) {
  const GgmlForm form = kernels_form();
  if (!form.lanes) GTEST_SKIP() << "kernels built without AVX2 / FMA: they keep their own order";
  // 37 per half: whole vectors through ggml's silu, the tail through libm's expf.
  const int64_t rows = 3, f = 37;
  Tensor x = random_tensor(DType::f32, {rows, 2 * f}, 50, -12, 12);
  const std::vector<double> xv = values(x), got = values(run_op("swiglu", {x})[0]);
  ASSERT_EQ(got.size(), size_t(rows * f));
  int64_t differ = 0;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < f; ++i) {
      const float a = float(xv[size_t(r * 2 * f + i)]), g = float(xv[size_t(r * 2 * f + f + i)]);
      const float e = i < f / form.lanes * form.lanes ? ggml_exp(-a, form) : std::exp(-a);
      differ += float(got[size_t(r * f + i)]) != a / (1.f + e) * g;
    }
  EXPECT_EQ(differ, 0) << "of " << rows * f;
}

// ---- rope ---------------------------------------------------------------------------------

TEST(Rope, DecompositionMatchesTheKernel) {
  struct Case {
    Attrs attrs;
    bool factors;
  };
  for (const Case& c : {Case{{}, false}, Case{{{"mode", "neox"}}, false},
                        Case{{{"n_rot", 6}, {"freq_scale", 0.5}}, true},
                        Case{{{"mode", "neox"}, {"n_rot", 4}, {"base", 1e6}}, true}}) {
    Tensors in{random_tensor(DType::f32, {2, 5, 3, 8}, 30),
               random_tensor(DType::i32, {2, 5}, 31, 0, 500)};
    if (c.factors)
      in.push_back(random_tensor(
          DType::f32, {c.attrs.has("n_rot") ? c.attrs.get_int("n_rot") / 2 : 4}, 32, 1, 8));
    // The decomposition's angles are f32 (the kernel's double): at position 500 that is
    // a few 1e-5 rad.
    EXPECT_LT(max_abs_diff(run_op("rope", in, c.attrs)[0], run_decomposed("rope", in, c.attrs)[0]),
              1e-4);
  }
}

TEST(Rope, InverseUndoesTheRotation) {
  Tensors in{random_tensor(DType::f32, {1, 4, 2, 8}, 33),
             random_tensor(DType::i64, {4}, 34, 0, 3000)};
  for (const char* mode : {"pairs", "neox"}) {
    Attrs a{{"mode", std::string(mode)}, {"n_rot", int64_t(6)}};
    Tensor y = run_op("rope", in, a)[0];
    a.set("inverse", true);
    Tensor back = run_op("rope", {y, in[1]}, a)[0];
    EXPECT_LT(max_abs_diff(back, in[0]), 1e-5) << mode;
  }
}

// ---- sample ---------------------------------------------------------------------------------

// Draws n tokens from one row of logits, row i with (seed, counter) = (seed, i).
std::vector<int32_t> draws(const std::vector<float>& logits, int64_t n, const Attrs& attrs,
                           int64_t seed = 42, const std::vector<int32_t>& history = {}) {
  const auto v = int64_t(logits.size());
  std::vector<float> rows;
  std::vector<int64_t> rng;
  std::vector<int32_t> hist;
  for (int64_t i = 0; i < n; ++i) {
    rows.insert(rows.end(), logits.begin(), logits.end());
    rng.push_back(seed);
    rng.push_back(i);
    hist.insert(hist.end(), history.begin(), history.end());
  }
  Tensors in{Tensor::from_vector(rows, {n, v}), Tensor::from_vector(rng, {n, 2})};
  if (!history.empty()) in.push_back(Tensor::from_vector(hist, {n, int64_t(history.size())}));
  return run_op("sample", in, attrs)[0].to_vector<int32_t>();
}

std::map<int32_t, double> frequencies(const std::vector<int32_t>& ids) {
  std::map<int32_t, double> f;
  for (int32_t id : ids) f[id] += 1.0 / double(ids.size());
  return f;
}

// softmax(l / temperature) over the ids `keep` (all when empty).
std::vector<double> probs(const std::vector<float>& l, double temperature,
                          std::set<int32_t> keep = {}) {
  std::vector<double> p(l.size(), 0.0);
  double m = *std::max_element(l.begin(), l.end()), total = 0;
  for (size_t i = 0; i < l.size(); ++i)
    if (keep.empty() || keep.count(int32_t(i))) total += p[i] = std::exp((l[i] - m) / temperature);
  for (double& x : p) x /= total;
  return p;
}

double max_freq_error(const std::vector<int32_t>& ids, const std::vector<double>& p) {
  auto f = frequencies(ids);
  double worst = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    auto it = f.find(int32_t(i));
    worst = std::max(worst, std::abs((it == f.end() ? 0.0 : it->second) - p[i]));
  }
  for (const auto& [id, x] : f)
    if (id < 0 || size_t(id) >= p.size()) worst = 1;  // out of the vocabulary
  return worst;
}

const std::vector<float> kLogits = {2.0f, 1.5f,  1.2f,  1.0f,  0.5f,  0.3f,
                                    0.0f, -0.5f, -1.0f, -2.0f, -3.0f, -4.0f};

TEST(Sample, GreedyIsTheArgmax) {
  Tensor logits = random_tensor(DType::f32, {64, 1000}, 40, -4, 4);
  Tensors in{logits, Tensor::zeros(DType::i64, {64, 2})};
  auto got = run_op("sample", in, {{"temperature", 0.0}})[0].to_vector<int32_t>();
  auto l = logits.to_vector<float>();
  for (int64_t r = 0; r < 64; ++r) {
    auto row = l.begin() + r * 1000;
    EXPECT_EQ(got[size_t(r)], int32_t(std::max_element(row, row + 1000) - row));
  }
}

TEST(Sample, TopKOnlyEverDrawsTheKLargest) {
  auto l = random_tensor(DType::f32, {200}, 41, -3, 3).to_vector<float>();
  std::vector<int32_t> order(l.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(),
            [&](int32_t a, int32_t b) { return l[size_t(a)] > l[size_t(b)]; });
  std::set<int32_t> top(order.begin(), order.begin() + 5), seen;
  for (int64_t seed : {1, 2, 3, 4})
    for (int32_t id : draws(l, 500, {{"temperature", 1.5}, {"top_k", 5}}, seed)) {
      EXPECT_TRUE(top.count(id)) << id << " is not among the 5 largest";
      seen.insert(id);
    }
  EXPECT_EQ(seen, top) << "every one of the k largest should appear in 2000 draws";
}

TEST(Sample, TopPFrequenciesMatchTheRenormalisedNucleus) {
  // softmax(kLogits): the nucleus for 0.8 is the 5 largest (0.78 after 4, 0.85 after 5).
  std::vector<double> p = probs(kLogits, 1.0);
  std::set<int32_t> nucleus;
  double cum = 0;
  for (int32_t i = 0; cum < 0.8; ++i) {  // kLogits is sorted
    cum += p[size_t(i)];
    nucleus.insert(i);
  }
  auto ids = draws(kLogits, 20000, {{"temperature", 1.0}, {"top_p", 0.8}});
  EXPECT_LT(max_freq_error(ids, probs(kLogits, 1.0, nucleus)), 0.01);
  // Temperature after top_p: the same nucleus, sharper inside.
  ids = draws(kLogits, 20000, {{"temperature", 0.5}, {"top_p", 0.8}}, 7);
  EXPECT_LT(max_freq_error(ids, probs(kLogits, 0.5, nucleus)), 0.01);
}

TEST(Sample, TemperatureFrequenciesMatchTheSoftmax) {
  auto ids = draws(kLogits, 20000, {{"temperature", 0.7}}, 9);
  EXPECT_LT(max_freq_error(ids, probs(kLogits, 0.7)), 0.01);
}

TEST(Sample, MinPExcludesTokensBelowMinPTimesTheTopProbability) {
  const double min_p = 0.2;
  std::vector<double> p = probs(kLogits, 1.0);
  std::set<int32_t> keep;
  for (size_t i = 0; i < p.size(); ++i)
    if (p[i] >= min_p * p[0]) keep.insert(int32_t(i));
  ASSERT_EQ(keep.size(), 5u);  // 2.0 .. 0.5: e^-1.5 = 0.22 >= 0.2 > e^-1.7
  auto ids = draws(kLogits, 20000, {{"temperature", 1.0}, {"min_p", min_p}}, 11);
  EXPECT_LT(max_freq_error(ids, probs(kLogits, 1.0, keep)), 0.01);
}

TEST(Sample, ASeedAndCounterReproduceTheDraw) {
  std::vector<float> flat(1000, 0.0f);  // uniform: every draw is the counter's
  Attrs a{{"temperature", 1.0}};
  auto first = draws(flat, 300, a, 5), again = draws(flat, 300, a, 5),
       other = draws(flat, 300, a, 6);
  EXPECT_EQ(first, again);
  std::set<int32_t> distinct(first.begin(), first.end());
  EXPECT_GT(distinct.size(), 250u) << "different counters should give different draws";
  int same = 0;
  for (size_t i = 0; i < first.size(); ++i) same += first[i] == other[i];
  EXPECT_LT(same, 10) << "different seeds should give different draws";
}

TEST(Sample, RepeatPenaltyMovesTheArgmaxAsLlamaCpp) {
  std::vector<float> l = {0.5f, 2.0f, 1.8f, -1.0f, -0.9f};
  Attrs greedy{{"temperature", 0.0}, {"repeat_penalty", 1.5}};
  EXPECT_EQ(draws(l, 1, greedy, 1, {-1, -1})[0], 1);  // empty history
  EXPECT_EQ(draws(l, 1, greedy, 1, {1, -1})[0], 2);   // 2.0 / 1.5 < 1.8
  // Each id once, however often it occurs: 2.0 / 1.05 > 1.8.
  Attrs mild{{"temperature", 0.0}, {"repeat_penalty", 1.05}};
  EXPECT_EQ(draws(l, 1, mild, 1, {1, 1, 1})[0], 1);
  // A negative logit is multiplied: -0.9 * 1.5 < -1.0.
  std::vector<float> neg = {-1.0f, -0.9f};
  EXPECT_EQ(draws(neg, 1, greedy, 1, {-1})[0], 1);
  EXPECT_EQ(draws(neg, 1, greedy, 1, {1})[0], 0);
}

}  // namespace
}  // namespace rlx
