// rope, kv_cache_write, attention_cached and sample against their definitions as loops in
// double. kv_cache_write updates its input 0 in place, so its references read a copy of
// the cache taken when the table was built (a kernel that wrote outside the new rows would
// otherwise leave its mistake in what the reference reads). sample's references redo the
// whole chain in double, Philox included (philox.h: the stream is part of the op's
// definition); the draws of the CPU kernel are in f32, so a draw within ~1e-6 of a
// candidate's boundary could differ: the cases use random logits, where that has
// probability ~1e-6.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <tuple>

#include "backend/cpu/philox.h"
#include "op_tables/consistency.h"

namespace rlx::test {

namespace {

using Shape = std::vector<int64_t>;

constexpr DType kFloats[] = {DType::f32, DType::f64, DType::f16, DType::bf16};
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

Tensor ints(DType dt, Shape s, std::vector<double> v) { return tensor_of(dt, std::move(s), v); }

// ---- rope ----------------------------------------------------------------------------

Tensors rope_ref(const Tensors& in, const Attrs& a) {
  const Shape& xs = in[0].shape();
  const size_t r = xs.size();
  const int64_t d = xs[r - 1], h = xs[r - 2];
  int64_t n = a.get_int("n_rot");
  if (n == 0) n = d;
  const bool neox = a.get_string("mode") == "neox";
  const double sign = a.get_bool("inverse") ? -1 : 1;
  auto x = values(in[0]), pos = values(in[1]);
  std::vector<double> ff = in.size() > 2 ? values(in[2]) : std::vector<double>{};
  Shape lead(xs.begin(), xs.end() - 2);
  std::vector<double> y = x;
  // 16- and 32-bit data rotate by ggml's f32 angles: pos * theta_scale^i multiplied pair by
  // pair in f32, then freq_scale * theta / factor (rounded to f32; cos and sin in double).
  auto angle = [&](double p, int64_t i) {
    const double fs = sign * a.get_float("freq_scale"), f = ff.empty() ? 1.0 : ff[size_t(i)];
    if (in[0].dtype() == DType::f64)
      return fs * p * std::pow(a.get_float("base"), -2.0 * double(i) / double(n)) / f;
    const float scale = std::pow(float(a.get_float("base")), -2.0f / float(n));
    float theta = float(p);
    for (int64_t j = 0; j < i; ++j) theta *= scale;
    return double(float(fs) * (theta / float(f)));
  };
  for (int64_t l = 0; l < numel(lead); ++l) {
    double p = pos[size_t(broadcast_index(unravel(l, lead), in[1].shape()))];
    for (int64_t hh = 0; hh < h; ++hh)
      for (int64_t i = 0; i < n / 2; ++i) {
        const double th = angle(p, i);
        int64_t i0 = neox ? i : 2 * i, i1 = neox ? i + n / 2 : 2 * i + 1;
        size_t at = size_t((l * h + hh) * d);
        double x0 = x[at + size_t(i0)], x1 = x[at + size_t(i1)];
        y[at + size_t(i0)] = x0 * std::cos(th) - x1 * std::sin(th);
        y[at + size_t(i1)] = x0 * std::sin(th) + x1 * std::cos(th);
      }
  }
  return {tensor_of(in[0].dtype(), xs, y)};
}

void rope_checks(CheckTable& t) {
  struct Case {
    Shape x, pos;
    DType pos_dt;
    Attrs attrs;
    int64_t factors;  // > 0: freq_factors of this length
    double max_pos;
    const char* note;
  };
  const std::vector<Case> cases = {
      {{2, 5, 3, 8}, {5}, DType::i32, {}, 0, 100, "pairs, pos [S]"},
      {{2, 5, 3, 8}, {2, 5}, DType::i64, {{"mode", "neox"}}, 0, 100, "neox, pos [B, S]"},
      {{2, 4, 2, 8},
       {2, 4},
       DType::i32,
       {{"n_rot", 4}, {"freq_scale", 0.5}, {"base", 500.0}},
       2,
       60,
       "partial pairs, freq_factors, scale"},
      {{1, 3, 2, 10}, {3}, DType::i64, {{"mode", "neox"}, {"n_rot", 6}}, 3, 30, "partial neox"},
      {{2, 3, 2, 6}, {3}, DType::i32, {{"inverse", true}}, 0, 50, "inverse"},
      {{4, 2, 6}, {4}, DType::i32, {{"mode", "neox"}}, 0, 20, "rank 3"},
      {{3, 2, 4, 2, 4}, {1, 4}, DType::i32, {}, 0, 20, "rank 5, broadcast pos"},
      {{1, 0, 2, 4}, {0}, DType::i32, {}, 0, 1, "empty"},
      {{1, 2, 2, 4}, {2}, DType::i32, {}, 0, 4000, "far positions"},
  };
  uint64_t seed = 3100;
  for (DType dt : kFloats)
    for (const Case& c : cases) {
      Tensors in{random_tensor(dt, c.x, ++seed),
                 random_tensor(c.pos_dt, c.pos, ++seed, 0, c.max_pos)};
      if (c.factors) in.push_back(random_tensor(DType::f32, {c.factors}, ++seed, 0.5, 4));
      OpCheck check = ref_check("rope", dt, in, c.attrs, rope_ref, c.note);
      // f32 math for 16-bit x: the default tolerance; f32 angles are exact in double.
      if (c.max_pos > 1000 && dt == DType::f32) check.atol = 2e-6;
      t.add(std::move(check));
    }
  // Several threads, heads of 64.
  t.add(ref_check("rope", DType::f32,
                  {random_tensor(DType::f32, {2, 64, 8, 64}, 3190),
                   random_tensor(DType::i32, {2, 64}, 3191, 0, 2000)},
                  {{"mode", "neox"}}, rope_ref, "wide"));
  // Rows enough for CUDA's block per row (prefill), partial rotation and freq_factors.
  t.add(ref_check("rope", DType::f32,
                  {random_tensor(DType::f32, {1, 300, 4, 20}, 3192),
                   random_tensor(DType::i64, {1, 300}, 3193, 0, 2000),
                   random_tensor(DType::f32, {6}, 3194, 0.5, 4)},
                  {{"n_rot", 12}}, rope_ref, "prefill rows, partial pairs"));
}

// ---- kv_cache_write ------------------------------------------------------------------

// The cache of the check (copied now: the kernel writes into the check's own input) with
// rows pos[b] .. pos[b] + S - 1 of every head replaced by new.
RefFn kv_cache_ref(const Tensor& cache) {
  Tensor original = cache.clone();
  return [original](const Tensors& in, const Attrs&) {
    const Shape& cs = original.shape();
    const int64_t kvh = cs[1], c = cs[2], d = cs[3], s = in[1].shape()[1];
    auto y = values(original), nw = values(in[1]), pos = values(in[2]);
    for (int64_t b = 0; b < cs[0]; ++b)
      for (int64_t si = 0; si < s; ++si)
        for (int64_t h = 0; h < kvh; ++h)
          for (int64_t e = 0; e < d; ++e)
            y[size_t(((b * kvh + h) * c + int64_t(pos[size_t(b)]) + si) * d + e)] =
                nw[size_t(((b * s + si) * kvh + h) * d + e)];
    // The new rows are rounded to the cache's dtype (tensor_of rounds every value).
    return Tensors{tensor_of(original.dtype(), cs, y)};
  };
}

void kv_cache_checks(CheckTable& t) {
  struct Case {
    Shape cache, nw;
    DType pos_dt;
    std::vector<double> pos;
    bool same;  // new in the cache's dtype (else f32)
    const char* note;
  };
  const std::vector<Case> cases = {
      {{2, 3, 10, 4}, {2, 3, 3, 4}, DType::i32, {0, 7}, false, "prefill, rows up to C"},
      {{2, 2, 6, 8}, {2, 1, 2, 8}, DType::i64, {5, 2}, true, "decode"},
      {{1, 2, 4, 3}, {1, 0, 2, 3}, DType::i32, {4}, false, "no rows"},
      {{1, 4, 64, 64}, {1, 20, 4, 64}, DType::i32, {30}, false, "wide"},
      // Enough rows to split over threads (each reads the positions the caller read).
      {{2, 4, 320, 64}, {2, 300, 4, 64}, DType::i64, {20, 0}, false, "rows over threads"},
  };
  uint64_t seed = 3300;
  for (DType dt : kFloats) {
    for (const Case& c : cases) {
      Tensor cache = random_tensor(dt, c.cache, ++seed);
      Tensors in{cache, random_tensor(c.same ? dt : DType::f32, c.nw, ++seed),
                 ints(c.pos_dt, {int64_t(c.pos.size())}, c.pos)};
      t.add(ref_check("kv_cache_write", dt, in, {}, kv_cache_ref(cache), c.note));
    }
    for (double p : {8.0, -1.0}) {
      OpCheck bad{"kv_cache_write",
                  dt,
                  {random_tensor(dt, {1, 2, 10, 4}, ++seed),
                   random_tensor(DType::f32, {1, 3, 2, 4}, ++seed), ints(DType::i32, {1}, {p})}};
      bad.error = p < 0 ? "got pos[0] = -1 with S = 3" : "pos[b] + S <= C = 10, got pos[0] = 8";
      bad.note = "out of range";
      t.add(std::move(bad));
    }
  }
}

// ---- attention_cached ----------------------------------------------------------------

// Query s of sequence b at position pos[b] + s, over cache rows 0 .. that position; head h
// reads KV head h / (H / KVH). Rows past the position are never read. A cache narrower
// than q rounds the queries and the probabilities to its dtype.
Tensors attention_cached_ref(const Tensors& in, const Attrs& a) {
  const Shape &qs = in[0].shape(), &ks = in[1].shape();
  const int64_t bn = qs[0], sn = qs[1], h = qs[2], d = qs[3], kvh = ks[1], c = ks[2];
  const DType ct = in[1].dtype();
  const bool narrow = dtype_size(ct) < dtype_size(in[0].dtype());
  auto rounded = [&](std::vector<double> x) {
    return narrow ? values(tensor_of(ct, {int64_t(x.size())}, x)) : x;
  };
  auto q = rounded(values(in[0])), k = values(in[1]), v = values(in[2]), pos = values(in[3]);
  double scale = a.get_float("scale");
  if (scale == 0) scale = 1 / std::sqrt(double(d));
  std::vector<double> y(q.size(), 0.0);
  for (int64_t b = 0; b < bn; ++b)
    for (int64_t s = 0; s < sn; ++s)
      for (int64_t hh = 0; hh < h; ++hh) {
        const int64_t g = hh / (h / kvh), last = int64_t(pos[size_t(b)]) + s;
        auto row = [&](int64_t j) { return size_t(((b * kvh + g) * c + j) * d); };
        const size_t qa = size_t(((b * sn + s) * h + hh) * d);
        std::vector<double> sc(size_t(last + 1));
        double m = -kInf, sum = 0;
        for (int64_t j = 0; j <= last; ++j) {
          double acc = 0;
          for (int64_t e = 0; e < d; ++e) acc += q[qa + size_t(e)] * k[row(j) + size_t(e)];
          sc[size_t(j)] = acc * scale;
          m = std::max(m, sc[size_t(j)]);
        }
        for (double& x : sc) sum += x = std::exp(x - m);
        for (double& x : sc) x /= sum;
        sc = rounded(sc);
        for (int64_t j = 0; j <= last; ++j)
          for (int64_t e = 0; e < d; ++e)
            y[qa + size_t(e)] += sc[size_t(j)] * v[row(j) + size_t(e)];
      }
  return {tensor_of(in[0].dtype(), qs, y)};
}

// A cache whose rows from `first` on (per sequence) hold NaN: what an uninitialised cache
// may hold where no query looks.
Tensor cache_with_nan_tail(DType dt, const Shape& s, const std::vector<double>& first,
                           uint64_t seed) {
  auto v = values(random_tensor(dt, s, seed));
  for (int64_t b = 0; b < s[0]; ++b)
    for (int64_t hh = 0; hh < s[1]; ++hh)
      for (int64_t j = int64_t(first[size_t(b)]); j < s[2]; ++j)
        for (int64_t e = 0; e < s[3]; ++e)
          v[size_t(((b * s[1] + hh) * s[2] + j) * s[3] + e)] = kNaN;
  return tensor_of(dt, s, v);
}

void attention_cached_checks(CheckTable& t) {
  struct Case {
    Shape q, cache;
    std::vector<double> pos;
    Attrs attrs;
    const char* note;
  };
  const std::vector<Case> cases = {
      {{2, 1, 4, 8}, {2, 2, 12, 8}, {5, 11}, {}, "decode, per-sequence positions"},
      {{1, 6, 4, 8}, {1, 1, 16, 8}, {3}, {}, "prefill after 3, one KV head"},
      {{1, 3, 2, 8}, {1, 2, 8, 8}, {0}, {{"scale", 0.3}}, "H = KVH, scale"},
      {{2, 2, 2, 20}, {2, 1, 9, 20}, {1, 7}, {}, "D not a multiple of 16"},
      {{1, 1, 4, 8}, {1, 2, 4, 8}, {0}, {}, "first token"},
      {{1, 0, 4, 8}, {1, 2, 4, 8}, {2}, {}, "no queries"},
      {{1, 20, 4, 128}, {1, 1, 40, 128}, {5}, {}, "prefill, D 128"},
      {{1, 70, 8, 64}, {1, 2, 96, 64}, {10}, {}, "long prefill (CUDA: one pass), D 64"},
  };
  uint64_t seed = 3500;
  for (DType dt : kFloats) {
    // 16-bit and f64 queries read caches of their own dtype; f32 ones f16, f32 and bf16.
    std::vector<DType> caches{dt};
    if (dt == DType::f32) caches = {DType::f16, DType::f32, DType::bf16};
    for (DType cd : caches)
      for (const Case& c : cases) {
        Tensors in{random_tensor(dt, c.q, ++seed), random_tensor(cd, c.cache, ++seed),
                   random_tensor(cd, c.cache, ++seed),
                   ints(DType::i32, {int64_t(c.pos.size())}, c.pos)};
        OpCheck check = ref_check("attention_cached", dt, in, c.attrs, attention_cached_ref,
                                  str_cat(c.note, ", cache ", dtype_name(cd)));
        // The long rows of P rounded to a 16-bit cache: from f32 (and on CUDA's one pass
        // before it is normalised), where the reference rounds f64; an element on either side
        // of a rounding boundary moves the output by up to a 16-bit ulp: the cache's tolerance.
        if (c.q[3] >= 64 && dtype_size(cd) == 2)
          std::tie(check.rtol, check.atol) = default_tolerance(cd);
        t.add(std::move(check));
      }
    // Rows past the last query hold NaN: never read.
    std::vector<double> pos{2, 4};
    Shape cs{2, 2, 10, 8};
    std::vector<double> first{pos[0] + 3, pos[1] + 3};
    t.add(ref_check(
        "attention_cached", dt,
        {random_tensor(dt, {2, 3, 4, 8}, ++seed), cache_with_nan_tail(dt, cs, first, ++seed),
         cache_with_nan_tail(dt, cs, first, ++seed), ints(DType::i64, {2}, pos)},
        {}, attention_cached_ref, "NaN past the last position, i64 pos"));
    if (dt == DType::f64) continue;  // f64 runs the decomposition, which does not check pos
    OpCheck bad{"attention_cached",
                dt,
                {random_tensor(dt, {1, 2, 2, 4}, ++seed), random_tensor(dt, {1, 1, 6, 4}, ++seed),
                 random_tensor(dt, {1, 1, 6, 4}, ++seed), ints(DType::i32, {1}, {5})}};
    bad.error = "pos[b] + S <= C = 6, got pos[0] = 5 with S = 2";
    bad.note = "out of range";
    t.add(std::move(bad));
  }
  // q, then the k and v caches of one dtype and shape, from seeds seed, seed + 1, seed + 2.
  auto cached = [](DType dt, DType qt, std::vector<int64_t> q, DType ct, std::vector<int64_t> kv,
                   Tensor pos, uint64_t seed, std::string note) {
    return ref_check("attention_cached", dt,
                     {random_tensor(qt, std::move(q), seed), random_tensor(ct, kv, seed + 1),
                      random_tensor(ct, kv, seed + 2), std::move(pos)},
                     {}, attention_cached_ref, std::move(note));
  };
  // Decode over many chunks on several threads; prefill in several query blocks.
  t.add(cached(DType::f32, DType::f32, {1, 1, 32, 64}, DType::f16, {1, 4, 300, 64},
               ints(DType::i32, {1}, {290}), 3590, "decode, 291 keys, D 64"));
  t.add(cached(DType::f32, DType::f32, {1, 40, 8, 64}, DType::bf16, {1, 2, 128, 64},
               ints(DType::i64, {1}, {20}), 3593, "prefill blocks, D 64"));
  t.add(cached(DType::f32, DType::f32, {2, 3, 4, 128}, DType::f32, {2, 2, 80, 128},
               ints(DType::i32, {2}, {70, 9}), 3596, "D 128"));
  // The GPU's tensor-core prefill (16-bit caches, D 64 / 128): a batch at two positions, a
  // row count (S G = 39) that leaves warps and lanes without rows, f16 queries. A probability
  // near a rounding boundary of the cache dtype may round either way in f32 and in the
  // reference's double: one f16 ulp of a probability times a value (~2^-11) is allowed.
  OpCheck mixed =
      cached(DType::f16, DType::f16, {2, 13, 6, 128}, DType::f16, {2, 2, 90, 128},
             ints(DType::i32, {2}, {5, 70}), 3605, "prefill at two positions, f16, D 128");
  OpCheck longer =
      cached(DType::f32, DType::f32, {1, 100, 4, 64}, DType::f16, {1, 1, 200, 64},
             ints(DType::i32, {1}, {90}), 3608, "prefill of 100 after 90, f16 cache, D 64");
  // One pass with D 128, two sequences whose rows see 1 to 4 key tiles (each of the two key
  // groups of a block takes every other tile; a block whose second group has none).
  OpCheck wide =
      cached(DType::f32, DType::f32, {2, 96, 4, 128}, DType::bf16, {2, 2, 300, 128},
             ints(DType::i32, {2}, {150, 7}), 3611, "prefill of 96 at 150 and 7, bf16, D 128");
  std::tie(wide.rtol, wide.atol) = default_tolerance(DType::bf16);
  t.add(std::move(wide));
  for (OpCheck* c : {&mixed, &longer}) {
    c->atol = 1e-3;
    t.add(std::move(*c));
  }
  // A cache of more rows than the GPU's one-kernel decode takes (4096): its split kernels;
  // and one at that bound, with a D of 256 and bf16 queries.
  t.add(ref_check(
      "attention_cached", DType::f32,
      {random_tensor(DType::f32, {2, 1, 4, 32}, 3599),
       random_tensor(DType::f16, {2, 2, 4200, 32}, 3600),
       random_tensor(DType::f16, {2, 2, 4200, 32}, 3601), ints(DType::i32, {2}, {4150, 77})},
      {}, attention_cached_ref, "decode, 4151 keys of a 4200-row cache"));
  t.add(ref_check(
      "attention_cached", DType::bf16,
      {random_tensor(DType::bf16, {1, 2, 2, 256}, 3602),
       random_tensor(DType::bf16, {1, 1, 4096, 256}, 3603),
       random_tensor(DType::bf16, {1, 1, 4096, 256}, 3604), ints(DType::i32, {1}, {4094})},
      {}, attention_cached_ref, "decode, a 4096-row cache, D 256"));
}

// ---- rope_attention_cached -----------------------------------------------------------

// Its parts' references in turn: q and k rotated, the caches written (copies taken now, as
// for kv_cache_write), attention over them.
RefFn rope_attention_ref(const Tensor& k_cache, const Tensor& v_cache) {
  RefFn k_write = kv_cache_ref(k_cache), v_write = kv_cache_ref(v_cache);
  return [=](const Tensors& in, const Attrs& a) {
    const Attrs rope{{"mode", a.get_string("mode")},
                     {"n_rot", a.get_int("n_rot")},
                     {"base", a.get_float("base")},
                     {"freq_scale", a.get_float("freq_scale")},
                     {"inverse", false}};
    auto rotated = [&](const Tensor& x) {
      Tensors r{x, in[5]};
      if (in.size() > 7) r.push_back(in[7]);
      return rope_ref(r, rope)[0];
    };
    Tensor kc = k_write({in[3], rotated(in[1]), in[6]}, {})[0];
    Tensor vc = v_write({in[4], in[2], in[6]}, {})[0];
    Tensor o = attention_cached_ref({rotated(in[0]), kc, vc, in[6]}, a)[0];
    return Tensors{o, kc, vc};
  };
}

void rope_attention_cached_checks(CheckTable& t) {
  struct Case {
    DType dt, cache;
    Shape q, kv, cache_shape;  // q [B, S, H, D], k and v [B, S, KVH, D]
    std::vector<double> pos;
    Attrs attrs;
    bool factors;
    const char* note;
  };
  using D = DType;
  const std::vector<Case> cases = {
      {D::f32,
       D::f16,
       {2, 1, 4, 16},
       {2, 1, 2, 16},
       {2, 2, 12, 16},
       {5, 11},
       {},
       false,
       "decode, per-sequence positions, f16 cache"},
      {D::f32,
       D::f32,
       {1, 1, 4, 16},
       {1, 1, 1, 16},
       {1, 1, 9, 16},
       {0},
       {{"mode", "neox"}, {"n_rot", 8}, {"scale", 0.3}},
       true,
       "first token, neox, partial, freq_factors"},
      {D::bf16,
       D::bf16,
       {1, 1, 8, 64},
       {1, 1, 2, 64},
       {1, 2, 40, 64},
       {37},
       {{"base", 5e5}},
       false,
       "bf16, D 64"},
      {D::f32,
       D::bf16,
       {1, 1, 2, 20},
       {1, 1, 1, 20},
       {1, 1, 7, 20},
       {3},
       {},
       false,
       "D not a multiple of 16"},
      {D::f16, D::f16, {1, 3, 4, 8}, {1, 3, 2, 8}, {1, 2, 10, 8}, {4}, {}, false, "three new rows"},
      {D::f32,
       D::f16,
       {2, 20, 8, 64},
       {2, 20, 2, 64},
       {2, 2, 64, 64},
       {5, 30},
       {},
       false,
       "prefill of 20 rows, per-sequence positions, f16 cache, D 64 (tensor cores)"},
      {D::bf16,
       D::bf16,
       {1, 70, 4, 128},
       {1, 70, 1, 128},
       {1, 1, 96, 128},
       {10},
       {{"mode", "neox"}},
       true,
       "long prefill (one pass), neox, freq_factors, D 128"},
      {D::f64, D::f64, {2, 1, 2, 8}, {2, 1, 1, 8}, {2, 1, 6, 8}, {2, 4}, {}, false, "f64"},
  };
  uint64_t seed = 3700;
  for (const Case& c : cases) {
    Tensor kc = random_tensor(c.cache, c.cache_shape, ++seed);
    Tensor vc = random_tensor(c.cache, c.cache_shape, ++seed);
    const int64_t b = c.q[0], sn = c.q[1];
    std::vector<double> positions;
    for (int64_t i = 0; i < b; ++i)
      for (int64_t j = 0; j < sn; ++j) positions.push_back(c.pos[size_t(i)] + double(j));
    Tensors in{random_tensor(c.dt, c.q, ++seed),
               random_tensor(c.dt, c.kv, ++seed),
               random_tensor(c.dt, c.kv, ++seed),
               kc,
               vc,
               ints(DType::i32, {b, sn}, positions),
               ints(DType::i64, {b}, c.pos)};
    const int64_t n_rot = c.attrs.find("n_rot") ? c.attrs.get_int("n_rot") : c.q[3];
    if (c.factors) in.push_back(random_tensor(DType::f32, {n_rot / 2}, ++seed, 1, 3));
    OpCheck check =
        ref_check("rope_attention_cached", c.dt, in, c.attrs, rope_attention_ref(kc, vc), c.note);
    if (c.dt == D::f16) check.atol = 1e-3;  // as attention_cached's f16 prefill rows
    // Long rows of P rounded to a 16-bit cache: that cache's tolerance, as attention_cached's.
    if (c.q[3] >= 64 && dtype_size(c.cache) == 2)
      std::tie(check.rtol, check.atol) = default_tolerance(c.cache);
    t.add(std::move(check));
  }
  OpCheck bad{"rope_attention_cached",
              DType::f32,
              {random_tensor(DType::f32, {1, 1, 2, 4}, ++seed),
               random_tensor(DType::f32, {1, 1, 1, 4}, ++seed),
               random_tensor(DType::f32, {1, 1, 1, 4}, ++seed),
               random_tensor(DType::f32, {1, 1, 6, 4}, ++seed),
               random_tensor(DType::f32, {1, 1, 6, 4}, ++seed), ints(DType::i32, {1, 1}, {6}),
               ints(DType::i32, {1}, {6})}};
  bad.error = "pos[b] + S <= C = 6, got pos[0] = 6 with S = 1";
  bad.note = "out of range";
  t.add(std::move(bad));
}

// ---- sample --------------------------------------------------------------------------

// The whole chain in double (llama.cpp's order), then the draw of the op's definition.
Tensors sample_ref(const Tensors& in, const Attrs& a) {
  const Shape& ls = in[0].shape();
  const int64_t v = ls.back(), rows = in[0].numel() / v;
  auto logits = values(in[0]), rng = values(in[1]);
  std::vector<double> hist = in.size() > 2 ? values(in[2]) : std::vector<double>{};
  const int64_t r = in.size() > 2 ? in[2].shape().back() : 0;
  const double temp = a.get_float("temperature"), top_p = a.get_float("top_p"),
               min_p = a.get_float("min_p"), pen = a.get_float("repeat_penalty");
  const int64_t top_k = a.get_int("top_k");
  std::vector<double> out;
  for (int64_t row = 0; row < rows; ++row) {
    std::vector<double> l(logits.begin() + row * v, logits.begin() + (row + 1) * v);
    std::vector<bool> done(size_t(v), false);
    for (int64_t i = 0; i < r; ++i) {
      auto id = int64_t(hist[size_t(row * r + i)]);
      if (id < 0 || done[size_t(id)]) continue;
      done[size_t(id)] = true;
      l[size_t(id)] = l[size_t(id)] > 0 ? l[size_t(id)] / pen : l[size_t(id)] * pen;
    }
    std::vector<int64_t> ids(static_cast<size_t>(v));
    std::iota(ids.begin(), ids.end(), 0);
    std::stable_sort(ids.begin(), ids.end(),
                     [&](int64_t x, int64_t y) { return l[size_t(x)] > l[size_t(y)]; });
    if (temp <= 0) {
      out.push_back(double(ids[0]));
      continue;
    }
    size_t n = ids.size();
    if (top_k > 0) n = std::min(n, size_t(top_k));
    const double top = l[size_t(ids[0])];
    if (top_p < 1) {
      double total = 0, cum = 0;
      for (size_t i = 0; i < n; ++i) total += std::exp(l[size_t(ids[i])] - top);
      for (size_t i = 0; i < n; ++i) {
        cum += std::exp(l[size_t(ids[i])] - top);
        if (cum >= top_p * total) {
          n = i + 1;
          break;
        }
      }
    }
    if (min_p > 0) {
      size_t i = 1;
      while (i < n && l[size_t(ids[i])] >= top + std::log(min_p)) ++i;
      n = i;
    }
    std::vector<int64_t> cand(ids.begin(), ids.begin() + std::ptrdiff_t(n));
    std::sort(cand.begin(), cand.end());
    double total = 0;
    for (int64_t id : cand) total += std::exp((l[size_t(id)] - top) / temp);
    auto seed = uint64_t(int64_t(rng[size_t(2 * row)])),
         ctr = uint64_t(int64_t(rng[size_t(2 * row + 1)]));
    cpu::philox::Block blk = cpu::philox::Stream{seed, 0}.block(ctr);
    const double target = cpu::philox::u53(blk[0], blk[1]) * total;
    double cum = 0;
    int64_t pick = cand.back();
    for (int64_t id : cand) {
      cum += std::exp((l[size_t(id)] - top) / temp);
      if (cum > target) {
        pick = id;
        break;
      }
    }
    out.push_back(double(pick));
  }
  return {tensor_of(DType::i32, Shape(ls.begin(), ls.end() - 1), out)};
}

Tensor rng_rows(int64_t rows, uint64_t seed) {
  std::vector<double> v;
  for (int64_t i = 0; i < rows; ++i) {
    v.push_back(double(seed + uint64_t(i) * 7919));
    v.push_back(double(i * 3));
  }
  return tensor_of(DType::i64, {rows, 2}, v);
}

void sample_checks(CheckTable& t) {
  struct Case {
    Attrs attrs;
    bool history;
    const char* note;
  };
  const std::vector<Case> cases = {
      {{{"temperature", 0.0}}, false, "greedy"},
      {{{"temperature", 0.0}, {"repeat_penalty", 1.7}}, true, "greedy, penalty"},
      {{{"temperature", 1.0}}, false, "full vocabulary"},
      {{{"temperature", 0.7}, {"top_k", 5}}, false, "top_k"},
      {{{"temperature", 1.3}, {"top_p", 0.6}}, false, "top_p alone"},
      {{{"temperature", 0.9}, {"top_k", 20}, {"top_p", 0.8}, {"min_p", 0.05}}, true, "the chain"},
      {{{"temperature", 1.0}, {"min_p", 0.2}}, false, "min_p alone"},
      {{{"temperature", 0.8}, {"top_k", 1000}}, false, "top_k above V"},
  };
  uint64_t seed = 3700;
  for (DType dt : kFloats)
    for (const Case& c : cases) {
      Tensors in{random_tensor(dt, {4, 300}, ++seed, -3, 3), rng_rows(4, ++seed)};
      if (c.history) {
        Tensor h = random_tensor(DType::i32, {4, 6}, ++seed, -1, 299);
        in.push_back(h);
      }
      t.add(ref_check("sample", dt, in, c.attrs, sample_ref, c.note));
    }
  // Ties go to the lowest id.
  t.add(ref_check("sample", DType::f32,
                  {tensor_of(DType::f32, {2, 5}, {1, 3, 3, 0, 2, 0, 5, 5, 5, -1}), rng_rows(2, 1)},
                  {{"temperature", 0.0}}, sample_ref, "ties"));
  // Ties past the first 8 logits (the CPU's vector scans): six equal largest, the first
  // wins the greedy draw and top_k = 3 cuts inside the run (the three lowest ids stay).
  std::vector<double> tied(80);
  for (size_t i = 0; i < tied.size(); ++i)
    tied[i] = (i % 40) % 7 == 3 ? 2.0 : double(i * 13 % 5) - 3;
  for (auto [attrs, note] : {std::pair<Attrs, const char*>{{{"temperature", 0.0}}, "ties, V = 40"},
                             {{{"temperature", 0.8}, {"top_k", 3}}, "top_k cut inside ties"}})
    t.add(ref_check("sample", DType::f32, {tensor_of(DType::f32, {2, 40}, tied), rng_rows(2, 4)},
                    attrs, sample_ref, note));
  t.add(ref_check("sample", DType::f32,
                  {random_tensor(DType::f32, {2, 40000}, 3790, -5, 5), rng_rows(2, 9)},
                  {{"temperature", 0.8}, {"top_p", 0.9}}, sample_ref, "top_p, large V"));
  t.add(ref_check("sample", DType::f32,
                  {random_tensor(DType::f32, {7}, 3791), tensor_of(DType::i64, {2}, {5, 6})},
                  {{"temperature", 0.5}}, sample_ref, "one row, rank 1"));
  OpCheck bad{
      "sample",
      DType::f32,
      {random_tensor(DType::f32, {1, 6}, 3792), rng_rows(1, 3), ints(DType::i32, {1, 2}, {1, 6})},
      {{"repeat_penalty", 1.2}}};
  bad.error = "history ids below V = 6";
  bad.note = "history id out of range";
  t.add(std::move(bad));
}

// ---- swiglu --------------------------------------------------------------------------

// silu(a) * b over the halves of x along axis, in double.
Tensors swiglu_ref(const Tensors& in, const Attrs& a) {
  const Tensor& x = in[0];
  const int64_t rank = x.rank(),
                axis = a.get_int("axis") < 0 ? a.get_int("axis") + rank : a.get_int("axis");
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= x.shape()[size_t(d)];
  for (int64_t d = axis + 1; d < rank; ++d) inner *= x.shape()[size_t(d)];
  const int64_t f = x.shape()[size_t(axis)] / 2;
  std::vector<double> v = values(x), y;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < f; ++j)
      for (int64_t i = 0; i < inner; ++i) {
        const double g = v[size_t((o * 2 * f + j) * inner + i)];
        const double u = v[size_t((o * 2 * f + f + j) * inner + i)];
        y.push_back(g / (1 + std::exp(-g)) * u);
      }
  std::vector<int64_t> shape = x.shape();
  shape[size_t(axis)] = f;
  return {tensor_of(x.dtype(), shape, y)};
}

void swiglu_checks(CheckTable& t) {
  uint64_t seed = 3900;
  for (DType dt : kFloats)
    t.add(ref_check("swiglu", dt, {random_tensor(dt, {3, 2, 22}, ++seed, -4, 4)}, {{"axis", -1}},
                    swiglu_ref, "a fused gate / up product"));
  t.add(ref_check("swiglu", DType::f32, {random_tensor(DType::f32, {4, 6, 3}, ++seed, -4, 4)},
                  {{"axis", 1}}, swiglu_ref, "an inner axis (decomposed on the GPU)"));
}

}  // namespace

CheckTable checks_llm() {
  CheckTable t;
  rope_checks(t);
  kv_cache_checks(t);
  attention_cached_checks(t);
  rope_attention_cached_checks(t);
  sample_checks(t);
  swiglu_checks(t);
  return t;
}

}  // namespace rlx::test
