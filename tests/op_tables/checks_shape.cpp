// Consistency checks of the shape family. References are naive loops over output indices
// in double: each output element names the input element it reads (remap), so the
// data-movement ops share one helper and differ only in their index arithmetic.
#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include "op_tables/consistency.h"

namespace rlx::test {

namespace {

using Idx = std::vector<int64_t>;
constexpr int64_t kBig = std::numeric_limits<int64_t>::max();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr DType kIndexDTypes[] = {DType::i64, DType::i32, DType::i16, DType::i8, DType::u8};

int64_t count(const Idx& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

int64_t norm(int64_t axis, int64_t rank) { return axis < 0 ? axis + rank : axis; }

// The tensor of `shape` whose element at output index i is element src(i) (a row-major
// flat index) of x, or `fill` where src gives -1.
template <class F>
Tensor remap(const Tensor& x, const Idx& shape, F src, double fill = 0) {
  auto xv = values(x);
  std::vector<double> out(static_cast<size_t>(count(shape)));
  for (size_t i = 0; i < out.size(); ++i) {
    int64_t s = src(unravel(int64_t(i), shape));
    out[i] = s < 0 ? fill : xv[size_t(s)];
  }
  return tensor_of(x.dtype(), shape, out);
}

// Wraps a negative index once; the checks only use indices in range.
int64_t wrap(double v, int64_t n) { return v < 0 ? int64_t(v) + n : int64_t(v); }

// Values in a range every dtype holds exactly (bool: 0/1, u8: >= 0).
Tensor data(DType dt, Idx shape, uint64_t seed) {
  return random_tensor(dt, std::move(shape), seed, -100, 100);
}

// --- views: the same values under a new shape ----------------------------------------

RefFn same_values(Idx shape) {
  return [shape](const Tensors& in, const Attrs&) {
    return Tensors{tensor_of(in[0].dtype(), shape, values(in[0]))};
  };
}

// --- transpose, broadcast_to, slice, tile, flip, pad ------------------------------------

Tensors transpose_ref(const Tensors& in, const Attrs& a) {
  const Tensor& x = in[0];
  int64_t r = x.rank();
  Idx perm = a.get_ints("perm");
  if (perm.empty())
    for (int64_t i = r - 1; i >= 0; --i) perm.push_back(i);
  Idx shape;
  for (int64_t& p : perm) shape.push_back(x.shape()[size_t(p = norm(p, r))]);
  return {remap(x, shape, [&](const Idx& oi) {
    Idx xi(static_cast<size_t>(r));
    for (size_t i = 0; i < perm.size(); ++i) xi[size_t(perm[i])] = oi[i];
    return ravel(xi, x.shape());
  })};
}

Tensors broadcast_ref(const Tensors& in, const Attrs& a) {
  const Tensor& x = in[0];
  return {
      remap(x, a.get_ints("shape"), [&](const Idx& oi) { return broadcast_index(oi, x.shape()); })};
}

// The positions ONNX Slice visits on a dim of size n.
Idx slice_positions(int64_t n, int64_t start, int64_t stop, int64_t step) {
  Idx out;
  if (n == 0) return out;
  if (start < 0) start += n;
  if (stop < 0) stop += n;
  if (step > 0) {
    start = std::clamp<int64_t>(start, 0, n);
    stop = std::clamp<int64_t>(stop, 0, n);
    for (int64_t i = start; i < stop;) {
      out.push_back(i);
      if (stop - i <= step) break;
      i += step;
    }
  } else {
    start = std::clamp<int64_t>(start, 0, n - 1);
    stop = std::clamp<int64_t>(stop, -1, n - 1);
    for (int64_t i = start; i > stop;) {
      out.push_back(i);
      if (i - stop - 1 <= -(step + 1)) break;
      i += step;
    }
  }
  return out;
}

Tensors slice_ref(const Tensors& in, const Attrs& a) {
  const Tensor& x = in[0];
  const Idx &starts = a.get_ints("starts"), &stops = a.get_ints("stops");
  const Idx &steps = a.get_ints("steps"), &axes = a.get_ints("axes");
  std::vector<Idx> pos;
  Idx shape = x.shape();
  for (int64_t n : shape) {
    Idx all(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) all[size_t(i)] = i;
    pos.push_back(all);
  }
  for (size_t i = 0; i < starts.size(); ++i) {
    size_t ax = size_t(axes.empty() ? int64_t(i) : norm(axes[i], x.rank()));
    pos[ax] = slice_positions(shape[ax], starts[i], stops[i], steps.empty() ? 1 : steps[i]);
    shape[ax] = int64_t(pos[ax].size());
  }
  return {remap(x, shape, [&](const Idx& oi) {
    Idx xi(oi.size());
    for (size_t d = 0; d < oi.size(); ++d) xi[d] = pos[d][size_t(oi[d])];
    return ravel(xi, x.shape());
  })};
}

Tensors tile_ref(const Tensors& in, const Attrs& a) {
  const Tensor& x = in[0];
  const Idx& reps = a.get_ints("repeats");
  Idx shape;
  for (size_t d = 0; d < reps.size(); ++d) shape.push_back(x.shape()[d] * reps[d]);
  return {remap(x, shape, [&](const Idx& oi) {
    Idx xi(oi.size());
    for (size_t d = 0; d < oi.size(); ++d) xi[d] = oi[d] % x.shape()[d];
    return ravel(xi, x.shape());
  })};
}

Tensors flip_ref(const Tensors& in, const Attrs& a) {
  const Tensor& x = in[0];
  const Idx& axes = a.get_ints("axes");
  std::vector<bool> flip(size_t(x.rank()), axes.empty());
  for (int64_t ax : axes) flip[size_t(norm(ax, x.rank()))] = true;
  return {remap(x, x.shape(), [&](const Idx& oi) {
    Idx xi = oi;
    for (size_t d = 0; d < xi.size(); ++d)
      if (flip[d]) xi[d] = x.shape()[d] - 1 - oi[d];
    return ravel(xi, x.shape());
  })};
}

Tensors pad_ref(const Tensors& in, const Attrs& a) {
  const Tensor& x = in[0];
  const Idx& pads = a.get_ints("pads");
  const std::string& mode = a.get_string("mode");
  size_t r = size_t(x.rank());
  Idx shape;
  for (size_t d = 0; d < r; ++d) shape.push_back(x.shape()[d] + pads[d] + pads[r + d]);
  auto src = [&](const Idx& oi) -> int64_t {
    Idx xi(r);
    for (size_t d = 0; d < r; ++d) {
      int64_t n = x.shape()[d], s = oi[d] - pads[d];
      if (mode == "edge") {
        s = std::min(std::max<int64_t>(s, 0), n - 1);
      } else if (mode == "reflect") {
        if (s < 0) s = -s;
        if (s > n - 1) s = 2 * (n - 1) - s;
      } else if (s < 0 || s >= n) {
        return -1;
      }
      xi[d] = s;
    }
    return ravel(xi, x.shape());
  };
  return {remap(x, shape, src, a.get_float("value"))};
}

// --- concat, split -------------------------------------------------------------------------

Tensors concat_ref(const Tensors& in, const Attrs& a) {
  int64_t axis = norm(a.get_int("axis"), in[0].rank());
  Idx shape = in[0].shape();
  shape[size_t(axis)] = 0;
  std::vector<double> all;  // inputs' values, one after another
  Idx base;
  for (const Tensor& t : in) {
    shape[size_t(axis)] += t.shape()[size_t(axis)];
    base.push_back(int64_t(all.size()));
    auto v = values(t);
    all.insert(all.end(), v.begin(), v.end());
  }
  Tensor flat = tensor_of(in[0].dtype(), {int64_t(all.size())}, all);
  return {remap(flat, shape, [&](Idx oi) {
    size_t k = 0;
    while (oi[size_t(axis)] >= in[k].shape()[size_t(axis)])
      oi[size_t(axis)] -= in[k++].shape()[size_t(axis)];
    return base[k] + ravel(oi, in[k].shape());
  })};
}

Tensors split_ref(const Tensors& in, const Attrs& a) {
  const Tensor& x = in[0];
  size_t axis = size_t(norm(a.get_int("axis"), x.rank()));
  Idx sizes = a.get_ints("sizes");
  if (sizes.empty()) sizes.assign(size_t(a.get_int("num")), x.shape()[axis] / a.get_int("num"));
  Tensors out;
  int64_t start = 0;
  for (int64_t s : sizes) {
    Idx shape = x.shape();
    shape[axis] = s;
    out.push_back(remap(x, shape, [&](Idx oi) {
      oi[axis] += start;
      return ravel(oi, x.shape());
    }));
    start += s;
  }
  return out;
}

// --- gather family ---------------------------------------------------------------------------

Tensors gather_ref(const Tensors& in, const Attrs& a) {
  const Tensor &x = in[0], &idx = in[1];
  size_t axis = size_t(norm(a.get_int("axis"), x.rank()));
  auto iv = values(idx);
  Idx shape(x.shape().begin(), x.shape().begin() + std::ptrdiff_t(axis));
  shape.insert(shape.end(), idx.shape().begin(), idx.shape().end());
  shape.insert(shape.end(), x.shape().begin() + std::ptrdiff_t(axis) + 1, x.shape().end());
  size_t q = size_t(idx.rank());
  return {remap(x, shape, [&](const Idx& oi) {
    Idx xi(oi.begin(), oi.begin() + std::ptrdiff_t(axis));
    Idx ii(oi.begin() + std::ptrdiff_t(axis), oi.begin() + std::ptrdiff_t(axis + q));
    xi.push_back(wrap(iv[size_t(ravel(ii, idx.shape()))], x.shape()[axis]));
    xi.insert(xi.end(), oi.begin() + std::ptrdiff_t(axis + q), oi.end());
    return ravel(xi, x.shape());
  })};
}

Tensors gather_elements_ref(const Tensors& in, const Attrs& a) {
  const Tensor &x = in[0], &idx = in[1];
  size_t axis = size_t(norm(a.get_int("axis"), x.rank()));
  auto iv = values(idx);
  return {remap(x, idx.shape(), [&](const Idx& oi) {
    Idx xi = oi;
    xi[axis] = wrap(iv[size_t(ravel(oi, idx.shape()))], x.shape()[axis]);
    return ravel(xi, x.shape());
  })};
}

Tensors gather_nd_ref(const Tensors& in, const Attrs& a) {
  const Tensor &x = in[0], &idx = in[1];
  size_t b = size_t(a.get_int("batch_dims"));
  size_t m = size_t(idx.shape().back());
  auto iv = values(idx);
  Idx shape(idx.shape().begin(), idx.shape().end() - 1);
  shape.insert(shape.end(), x.shape().begin() + std::ptrdiff_t(b + m), x.shape().end());
  size_t lead = size_t(idx.rank()) - 1;  // output dims taken from indices
  return {remap(x, shape, [&](const Idx& oi) {
    Idx tuple(oi.begin(), oi.begin() + std::ptrdiff_t(lead));
    Idx xi(oi.begin(), oi.begin() + std::ptrdiff_t(b));  // batch coordinates
    for (size_t k = 0; k < m; ++k) {
      Idx ii = tuple;
      ii.push_back(int64_t(k));
      xi.push_back(wrap(iv[size_t(ravel(ii, idx.shape()))], x.shape()[b + k]));
    }
    xi.insert(xi.end(), oi.begin() + std::ptrdiff_t(lead), oi.end());
    return ravel(xi, x.shape());
  })};
}

// --- scatter family --------------------------------------------------------------------------

double reduce(const std::string& red, bool logical, double a, double b) {
  if (red == "none") return b;
  if (std::isnan(a) || std::isnan(b)) return red == "add" || red == "mul" ? a + b : kNaN;
  if (red == "add") return logical ? double(a != 0 || b != 0) : a + b;
  if (red == "mul") return logical ? double(a != 0 && b != 0) : a * b;
  return red == "max" ? std::max(a, b) : std::min(a, b);
}

Tensors scatter_elements_ref(const Tensors& in, const Attrs& a) {
  const Tensor &x = in[0], &idx = in[1], &upd = in[2];
  size_t axis = size_t(norm(a.get_int("axis"), x.rank()));
  const std::string& red = a.get_string("reduction");
  auto out = values(x), iv = values(idx), uv = values(upd);
  for (size_t i = 0; i < iv.size(); ++i) {  // row-major: duplicates apply in order
    Idx xi = unravel(int64_t(i), idx.shape());
    xi[axis] = wrap(iv[i], x.shape()[axis]);
    double& o = out[size_t(ravel(xi, x.shape()))];
    o = reduce(red, is_bool(x.dtype()), o, uv[i]);
  }
  return {tensor_of(x.dtype(), x.shape(), out)};
}

Tensors scatter_nd_ref(const Tensors& in, const Attrs& a) {
  const Tensor &x = in[0], &idx = in[1], &upd = in[2];
  const std::string& red = a.get_string("reduction");
  size_t m = size_t(idx.shape().back());
  auto out = values(x), iv = values(idx), uv = values(upd);
  Idx tuples(idx.shape().begin(), idx.shape().end() - 1);
  Idx slice(x.shape().begin() + std::ptrdiff_t(m), x.shape().end());
  int64_t len = count(slice);
  for (int64_t t = 0; t < count(tuples); ++t) {
    for (int64_t j = 0; j < len; ++j) {
      Idx xi;
      for (size_t k = 0; k < m; ++k) xi.push_back(wrap(iv[size_t(t) * m + k], x.shape()[k]));
      Idx rest = unravel(j, slice);
      xi.insert(xi.end(), rest.begin(), rest.end());
      double& o = out[size_t(ravel(xi, x.shape()))];
      o = reduce(red, is_bool(x.dtype()), o, uv[size_t(t * len + j)]);
    }
  }
  return {tensor_of(x.dtype(), x.shape(), out)};
}

// --- iota, one_hot, nonzero, constant -------------------------------------------------------

Tensors iota_ref(const Tensors&, const Attrs& a) {
  const Idx& shape = a.get_ints("shape");
  size_t axis = size_t(norm(a.get_int("axis"), int64_t(shape.size())));
  std::vector<double> v(static_cast<size_t>(count(shape)));
  for (size_t i = 0; i < v.size(); ++i) v[i] = double(unravel(int64_t(i), shape)[axis]);
  return {tensor_of(a.get_dtype("dtype"), shape, v)};
}

Tensors one_hot_ref(const Tensors& in, const Attrs& a) {
  const Tensor& idx = in[0];
  int64_t depth = a.get_int("depth");
  size_t axis = size_t(norm(a.get_int("axis"), idx.rank() + 1));
  Idx shape = idx.shape();
  shape.insert(shape.begin() + std::ptrdiff_t(axis), depth);
  auto iv = values(idx);
  std::vector<double> v(static_cast<size_t>(count(shape)));
  for (size_t i = 0; i < v.size(); ++i) {
    Idx oi = unravel(int64_t(i), shape);
    int64_t d = oi[axis];
    oi.erase(oi.begin() + std::ptrdiff_t(axis));
    double k = iv[size_t(ravel(oi, idx.shape()))];
    bool on = k == double(d) || k == double(d - depth);  // negatives count from the end
    v[i] = on ? a.get_float("on_value") : a.get_float("off_value");
  }
  return {tensor_of(a.get_dtype("dtype"), shape, v)};
}

Tensors nonzero_ref(const Tensors& in, const Attrs&) {
  const Tensor& x = in[0];
  auto xv = values(x);
  std::vector<Idx> hits;
  for (size_t i = 0; i < xv.size(); ++i)
    if (xv[i] != 0) hits.push_back(unravel(int64_t(i), x.shape()));
  int64_t n = int64_t(hits.size());
  std::vector<double> v(size_t(x.rank() * n));
  for (int64_t j = 0; j < n; ++j)
    for (int64_t d = 0; d < x.rank(); ++d)
      v[size_t(d * n + j)] = double(hits[size_t(j)][size_t(d)]);
  return {tensor_of(DType::i64, {x.rank(), n}, v)};
}

RefFn literal_ref(const Literal& lit) {
  return [lit](const Tensors&, const Attrs&) {
    return Tensors{tensor_of(lit.dtype(), lit.shape(), lit.to_doubles())};
  };
}

// --- sort, top_k -----------------------------------------------------------------------------

// The first k of each line along axis: NaN largest, ties by lower index.
Tensors sorted_ref(const Tensor& x, int64_t axis, int64_t k, bool descending) {
  size_t ax = size_t(norm(axis, x.rank()));
  auto xv = values(x);
  Idx shape = x.shape();
  shape[ax] = k;
  std::vector<double> vals(size_t(count(shape))), idxs(vals.size());
  auto key_less = [](double a, double b) { return !std::isnan(a) && (std::isnan(b) || a < b); };
  Idx lines = x.shape();
  lines[ax] = 1;
  for (int64_t l = 0; l < count(lines); ++l) {
    Idx xi = unravel(l, lines);
    std::vector<std::pair<double, int64_t>> line;
    for (xi[ax] = 0; xi[ax] < x.shape()[ax]; ++xi[ax])
      line.push_back({xv[size_t(ravel(xi, x.shape()))], xi[ax]});
    std::stable_sort(line.begin(), line.end(), [&](const auto& p, const auto& q) {
      return descending ? key_less(q.first, p.first) : key_less(p.first, q.first);
    });
    for (xi[ax] = 0; xi[ax] < k; ++xi[ax]) {
      size_t o = size_t(ravel(xi, shape));
      vals[o] = line[size_t(xi[ax])].first;
      idxs[o] = double(line[size_t(xi[ax])].second);
    }
  }
  return {tensor_of(x.dtype(), shape, vals), tensor_of(DType::i64, shape, idxs)};
}

Tensors sort_ref(const Tensors& in, const Attrs& a) {
  int64_t axis = norm(a.get_int("axis"), in[0].rank());
  return sorted_ref(in[0], axis, in[0].shape()[size_t(axis)], a.get_bool("descending"));
}

Tensors top_k_ref(const Tensors& in, const Attrs& a) {
  return sorted_ref(in[0], a.get_int("axis"), a.get_int("k"), a.get_bool("largest"));
}

// sorted=false allows any order of the k results: compare them as sets of (index, value)
// pairs, lines taken one by one.
VerifyFn top_k_unsorted() {
  return [](const Tensors& in, const Tensors& out, const Attrs& a) -> std::string {
    Tensors want = top_k_ref(in, a);
    if (out.size() != 2 || out[0].type().str() != want[0].type().str() ||
        out[1].type().str() != want[1].type().str())
      return "expected outputs " + want[0].type().str() + ", " + want[1].type().str();
    int64_t axis = norm(a.get_int("axis"), in[0].rank());
    auto collect = [&](const Tensors& t) {
      auto v = values(t[0]), i = values(t[1]);
      std::set<std::pair<int64_t, std::pair<double, double>>> s;  // (line, (index, value))
      for (size_t p = 0; p < v.size(); ++p) {
        Idx oi = unravel(int64_t(p), t[0].shape());
        oi[size_t(axis)] = 0;
        s.insert({ravel(oi, t[0].shape()), {i[p], v[p]}});
      }
      return s;
    };
    return collect(out) == collect(want) ? "" : "expected the same k (index, value) pairs per line";
  };
}

// --- the table ------------------------------------------------------------------------------

void add_views(CheckTable& t, uint64_t& seed) {
  struct Case {
    const char* op;
    Idx in;
    Attrs attrs;
    Idx out;
  };
  const std::vector<Case> cases = {
      {"reshape", {2, 3, 4}, {{"shape", IntList{0, -1}}}, {2, 12}},
      {"reshape", {2, 3, 4}, {{"shape", IntList{4, 0, -1}}}, {4, 3, 2}},
      {"reshape", {1}, {{"shape", IntList{}}}, {}},
      {"reshape", {}, {{"shape", IntList{1, 1}}}, {1, 1}},
      {"reshape", {0, 3}, {{"shape", IntList{-1, 5}}}, {0, 5}},
      {"expand_dims", {2, 3}, {{"axes", IntList{0}}}, {1, 2, 3}},
      {"expand_dims", {2, 3}, {{"axes", IntList{3, 1}}}, {2, 1, 3, 1}},
      {"expand_dims", {2, 3}, {{"axes", IntList{-1}}}, {2, 3, 1}},
      {"expand_dims", {}, {{"axes", IntList{0, 1}}}, {1, 1}},
      {"expand_dims", {0}, {{"axes", IntList{}}}, {0}},
      {"squeeze", {1, 3, 1}, {}, {3}},
      {"squeeze", {1, 3, 1}, {{"axes", IntList{-1}}}, {1, 3}},
      {"squeeze", {1, 1}, {}, {}},
      {"squeeze", {0, 2}, {}, {0, 2}},
  };
  for (const char* op : {"reshape", "expand_dims", "squeeze"}) {
    for (DType dt : kAllDTypes) {
      for (const Case& c : cases) {
        if (std::string(c.op) != op) continue;
        t.add(ref_check(op, dt, {data(dt, c.in, seed++)}, c.attrs, same_values(c.out)));
        if (dt != DType::f32) break;  // every shape once, in f32; other dtypes: the first
      }
    }
  }
}

// shape_of: the dims as i64; dynamic_reshape: the same values under the shape a value
// gives (0 copies, -1 infers), with a bad shape found only at run time.
void add_dynamic_shapes(CheckTable& t, uint64_t& seed) {
  auto dims = [](const Tensors& in, const Attrs&) {
    std::vector<double> d;
    for (int64_t n : in[0].shape()) d.push_back(double(n));
    return Tensors{tensor_of(DType::i64, {int64_t(d.size())}, d)};
  };
  for (DType dt : kAllDTypes)
    t.add(ref_check("shape_of", dt, {data(dt, {2, 3, 4}, seed++)}, {}, dims));
  for (Idx shape : {Idx{}, Idx{0, 5}, Idx{7}})
    t.add(ref_check("shape_of", DType::f32, {data(DType::f32, shape, seed++)}, {}, dims));

  auto spec = [](Idx v) {
    std::vector<double> d(v.begin(), v.end());
    return tensor_of(DType::i64, {int64_t(v.size())}, d);
  };
  struct Case {
    Idx in, spec, out;
  };
  const std::vector<Case> cases = {
      {{2, 3, 4}, {0, -1}, {2, 12}},  {{2, 3, 4}, {4, 0, -1}, {4, 3, 2}},
      {{2, 3, 4}, {24}, {24}},        {{1}, {}, {}},
      {{}, {1, 1}, {1, 1}},           {{0, 3}, {-1, 5}, {0, 5}},
      {{6, 1}, {1, 3, 2}, {1, 3, 2}},
  };
  for (DType dt : kAllDTypes) {
    for (const Case& c : cases) {
      t.add(ref_check("dynamic_reshape", dt, {data(dt, c.in, seed++), spec(c.spec)}, {},
                      same_values(c.out)));
      if (dt != DType::f32) break;  // every case once, in f32; other dtypes: the first
    }
  }
  for (auto [bad, why] : {std::pair{Idx{4, 2}, "as many elements"},
                          {Idx{-1, -1}, "at most one -1"},
                          {Idx{5, -1}, "divides"},
                          {Idx{2, 3, 0}, "0 (copy)"},
                          {Idx{-2, -3}, "entries >= -1"}}) {
    OpCheck c = ref_check("dynamic_reshape", DType::f32,
                          {data(DType::f32, {2, 3}, seed++), spec(bad)}, {}, nullptr, why);
    c.error = why;
    t.add(c);
  }
}

// Ops whose only input is data of any dtype: the first case runs in every dtype, the
// rest in a rotation of dtypes.
void add_data_op(CheckTable& t, uint64_t& seed, const char* op, RefFn ref,
                 const std::vector<std::pair<Idx, Attrs>>& cases) {
  for (DType dt : kAllDTypes)
    t.add(ref_check(op, dt, {data(dt, cases[0].first, seed++)}, cases[0].second, ref));
  for (size_t i = 1; i < cases.size(); ++i) {
    DType dt = kAllDTypes[i % std::size(kAllDTypes)];
    t.add(ref_check(op, dt, {data(dt, cases[i].first, seed++)}, cases[i].second, ref));
  }
}

void add_movement(CheckTable& t, uint64_t& seed) {
  add_data_op(t, seed, "transpose", transpose_ref,
              {{{2, 3, 4}, {}},
               {{2, 3, 4}, {{"perm", IntList{1, 0, 2}}}},
               {{2, 3, 4}, {{"perm", IntList{0, -1, -2}}}},
               {{2, 3, 4, 5}, {{"perm", IntList{0, 2, 1, 3}}}},
               {{}, {}},
               {{0, 1}, {}},
               {{1, 5, 1}, {{"perm", IntList{2, 0, 1}}}},
               {{300, 257}, {}},
               {{3, 40, 50}, {{"perm", IntList{0, 2, 1}}}},
               {{33, 2, 17}, {{"perm", IntList{2, 1, 0}}}}});
  add_data_op(t, seed, "broadcast_to", broadcast_ref,
              {{{3}, {{"shape", IntList{2, 3}}}},
               {{1, 3}, {{"shape", IntList{4, 2, 3}}}},
               {{4, 1}, {{"shape", IntList{4, 5}}}},
               {{}, {{"shape", IntList{}}}},
               {{}, {{"shape", IntList{2, 2}}}},
               {{1}, {{"shape", IntList{0}}}},
               {{2, 1, 3}, {{"shape", IntList{2, 2, 4, 3}}}},
               {{1, 70000}, {{"shape", IntList{2, 70000}}}}});
  auto slice = [](Idx starts, Idx stops, Idx steps = {}, Idx axes = {}) {
    return Attrs{{"starts", starts}, {"stops", stops}, {"steps", steps}, {"axes", axes}};
  };
  add_data_op(t, seed, "slice", slice_ref,
              {{{10, 20}, slice({1}, {5})},
               {{10, 20}, slice({0}, {kBig}, {3}, {-1})},
               {{10, 20}, slice({-3, 2}, {-1, 100})},
               {{10}, slice({-1}, {-kBig}, {-1})},
               {{10}, slice({8}, {1}, {-3})},
               {{10}, slice({5}, {2})},
               {{10}, slice({2}, {5}, {-1})},
               {{10}, slice({1}, {2}, {INT64_MIN})},
               {{10}, slice({9}, {0}, {INT64_MIN})},
               {{0, 3}, slice({0}, {1})},
               {{4, 5, 6}, slice({3, -1, 1}, {0, -kBig, 5}, {-2, -2, 2}, {0, 2, 1})},
               {{6, 8}, slice({kBig}, {-kBig}, {-1}, {1})},
               {{100000}, slice({5}, {kBig})}});
  add_data_op(t, seed, "tile", tile_ref,
              {{{2, 3}, {{"repeats", IntList{2, 1}}}},
               {{2, 3}, {{"repeats", IntList{1, 0}}}},
               {{}, {{"repeats", IntList{}}}},
               {{2, 3}, {{"repeats", IntList{2, 3}}}},
               {{1, 3, 2}, {{"repeats", IntList{3, 1, 2}}}},
               {{0, 2}, {{"repeats", IntList{3, 2}}}}});
  add_data_op(t, seed, "flip", flip_ref,
              {{{2, 3, 4}, {}},
               {{2, 3, 4}, {{"axes", IntList{0, -1}}}},
               {{2, 3, 4}, {{"axes", IntList{1}}}},
               {{}, {}},
               {{2, 0}, {}},
               {{5}, {{"axes", IntList{-1}}}},
               {{3, 40000}, {{"axes", IntList{1}}}},
               {{100000}, {}}});
  auto pad = [](Idx pads, const char* mode = "constant", double value = 0) {
    return Attrs{{"pads", pads}, {"mode", mode}, {"value", value}};
  };
  add_data_op(t, seed, "pad", pad_ref,
              {{{2, 3}, pad({1, 0, 1, 2}, "constant", 1)},
               {{2, 3}, pad({1, 0, 1, 2}, "reflect")},
               {{2, 3}, pad({1, 0, 1, 2}, "edge")},
               {{4, 5}, pad({-1, 0, -1, 2}, "constant", -1)},
               {{3, 3}, pad({2, 2, 2, 2}, "reflect")},
               {{4, 5}, pad({-1, 3, 2, -2}, "reflect")},
               {{4, 5}, pad({-2, 4, 1, -3}, "edge")},
               {{0, 3}, pad({0, 1, 0, 1}, "edge")},
               {{0}, pad({2, 1}, "constant", 1)},
               {{}, pad({})},
               {{2, 3, 4}, pad({0, 1, 1, 1, 0, 2}, "constant", 2)},
               {{1, 4}, pad({3, 0, 0, 0}, "edge")},
               {{4, 5}, pad({0, 3, 0, -6}, "reflect")},
               {{4, 5}, pad({1, 4, -2, -8}, "edge")},
               {{300, 200}, pad({1, 2, 3, 4}, "reflect")},
               {{300, 200}, pad({1, -2, 3, 4}, "constant", 7)}});
}

void add_concat_split(CheckTable& t, uint64_t& seed) {
  struct Case {
    std::vector<Idx> shapes;
    int64_t axis;
  };
  const std::vector<Case> concat = {
      {{{2, 3}, {4, 3}}, 0}, {{{2, 3}, {2, 5}, {2, 0}}, -1}, {{{5}}, 0},
      {{{0, 3}, {2, 3}}, 0}, {{{2, 1, 3}, {2, 4, 3}}, 1},    {{{3, 2, 2}, {3, 2, 1}}, 2}};
  for (size_t i = 0; i < concat.size(); ++i) {
    for (DType dt : kAllDTypes) {
      if (i > 0 && dt != kAllDTypes[i % std::size(kAllDTypes)]) continue;
      Tensors in;
      for (const Idx& s : concat[i].shapes) in.push_back(data(dt, s, seed++));
      t.add(ref_check("concat", dt, in, {{"axis", concat[i].axis}}, concat_ref));
    }
  }
  std::vector<std::pair<Idx, Attrs>> split = {
      {{6, 2}, {{"num", 3}}},
      {{6, 5}, {{"axis", -1}, {"sizes", IntList{1, 4, 0}}}},
      {{0}, {{"num", 2}}},
      {{2, 6, 3}, {{"axis", 1}, {"sizes", IntList{2, 1, 3}}}},
      {{4, 3}, {{"num", 1}}},
      // More parts than the GPU's one-launch split takes (8); a fused q/k/v row.
      {{2, 10}, {{"axis", 1}, {"num", 10}}},
      {{2, 1, 40}, {{"axis", 2}, {"sizes", IntList{24, 8, 8}}}}};
  add_data_op(t, seed, "split", split_ref, split);
  // Unit dims before the axis: the parts are views of the input (a decode step's row). Own
  // seeds, so the tables after these draw the data they always did.
  uint64_t view_seed = 9400;
  add_data_op(t, view_seed, "split", split_ref,
              {{{1, 1, 40}, {{"axis", 2}, {"sizes", IntList{24, 8, 8}}}},
               {{1, 6, 4}, {{"axis", 1}, {"sizes", IntList{1, 0, 5}}}}});
}

void add_gathers(CheckTable& t, uint64_t& seed) {
  // gather: every data dtype with i64 indices, every index dtype with f32 data.
  for (DType dt : kAllDTypes)
    t.add(ref_check("gather", dt,
                    {data(dt, {5, 4}, seed++), tensor_of(DType::i64, {3}, {4, -1, 0})}, {},
                    gather_ref));
  for (DType it : kIndexDTypes)
    t.add(ref_check("gather", DType::f32,
                    {data(DType::f32, {5, 4}, seed++), tensor_of(it, {2, 3}, {3, 0, 2, 1, 3, 3})},
                    {{"axis", 1}}, gather_ref, str_cat("indices ", dtype_name(it))));
  t.add(ref_check("gather", DType::f16,
                  {data(DType::f16, {5, 4}, seed++), tensor_of(DType::i64, {}, {-5})},
                  {{"axis", -2}}, gather_ref, "scalar index"));
  t.add(ref_check("gather", DType::bf16,
                  {data(DType::bf16, {5, 4}, seed++), tensor_of(DType::u8, {0}, {})}, {},
                  gather_ref, "no indices"));
  t.add(
      ref_check("gather", DType::i32,
                {data(DType::i32, {3, 4, 5}, seed++), tensor_of(DType::i32, {2, 2}, {-4, 3, 1, 1})},
                {{"axis", 1}}, gather_ref));
  t.add(ref_check("gather", DType::f64,
                  {data(DType::f64, {1000, 64}, seed++),
                   random_tensor(DType::i64, {4, 200}, seed++, -1000, 999)},
                  {}, gather_ref, "large"));

  for (DType dt : kAllDTypes)
    t.add(ref_check("gather_elements", dt,
                    {data(dt, {5, 4}, seed++), random_tensor(DType::i64, {7, 4}, seed++, -5, 4)},
                    {}, gather_elements_ref));
  for (DType it : kIndexDTypes)
    t.add(ref_check("gather_elements", DType::f32,
                    {data(DType::f32, {5, 4}, seed++), random_tensor(it, {2, 9}, seed++, -4, 3)},
                    {{"axis", -1}}, gather_elements_ref, str_cat("indices ", dtype_name(it))));
  t.add(ref_check(
      "gather_elements", DType::i16,
      {data(DType::i16, {3, 4, 5}, seed++), random_tensor(DType::i32, {2, 6, 3}, seed++, -4, 3)},
      {{"axis", 1}}, gather_elements_ref));
  t.add(ref_check("gather_elements", DType::f32,
                  {data(DType::f32, {5, 4}, seed++), tensor_of(DType::i64, {0, 4}, {})}, {},
                  gather_elements_ref));

  struct Nd {
    Idx data, idx;
    int64_t batch;
    double lo, hi;
  };
  const std::vector<Nd> nd = {
      {{5, 4, 3}, {7, 2}, 0, -4, 3},    {{5, 4, 3}, {7, 3}, 0, -3, 2},
      {{5, 4, 3}, {2, 6, 1}, 0, -5, 4}, {{2, 4, 3}, {2, 6, 1}, 1, -4, 3},
      {{2, 4, 3}, {2, 6, 2}, 1, -3, 2}, {{5, 4}, {0, 1}, 0, 0, 0},
      {{5, 4}, {3, 0}, 0, 0, 0},        {{2, 3, 4, 5}, {2, 3, 2, 1}, 2, -4, 3}};
  for (size_t i = 0; i < nd.size(); ++i) {
    for (DType dt : kAllDTypes) {
      if (i > 0 && dt != kAllDTypes[i % std::size(kAllDTypes)]) continue;
      DType it = kIndexDTypes[i % std::size(kIndexDTypes)];  // u8: no negatives
      t.add(ref_check(
          "gather_nd", dt,
          {data(dt, nd[i].data, seed++), random_tensor(it, nd[i].idx, seed++, nd[i].lo, nd[i].hi)},
          {{"batch_dims", nd[i].batch}}, gather_nd_ref));
    }
  }
}

void add_scatters(CheckTable& t, uint64_t& seed) {
  const char* reductions[] = {"none", "add", "mul", "max", "min"};
  // Small values: products of duplicates stay within i8.
  auto small = [&](DType dt, Idx shape, double r) {
    return random_tensor(dt, shape, seed++, -r, r);
  };
  // Duplicate indices in every line (7 updates into 5 rows).
  for (DType dt : kAllDTypes)
    for (const char* red : reductions)
      t.add(ref_check("scatter_elements", dt,
                      {small(dt, {5, 4}, 3), random_tensor(DType::i64, {7, 4}, seed++, -5, 4),
                       small(dt, {7, 4}, 2)},
                      {{"reduction", red}}, scatter_elements_ref, "duplicates"));
  for (DType it : kIndexDTypes)
    t.add(ref_check("scatter_elements", DType::f32,
                    {data(DType::f32, {3, 5}, seed++), random_tensor(it, {2, 8}, seed++, -5, 4),
                     data(DType::f32, {2, 8}, seed++)},
                    {{"axis", -1}, {"reduction", "add"}}, scatter_elements_ref,
                    str_cat("indices ", dtype_name(it))));
  t.add(ref_check("scatter_elements", DType::i64,
                  {data(DType::i64, {5}, seed++), tensor_of(DType::i64, {0}, {}),
                   tensor_of(DType::i64, {0}, {})},
                  {{"reduction", "max"}}, scatter_elements_ref, "no updates"));
  t.add(ref_check(
      "scatter_elements", DType::f32,
      {data(DType::f32, {3, 4, 5}, seed++), random_tensor(DType::i32, {2, 6, 3}, seed++, -4, 3),
       data(DType::f32, {2, 6, 3}, seed++)},
      {{"axis", 1}, {"reduction", "add"}}, scatter_elements_ref, "3-d"));
  t.add(ref_check(
      "scatter_elements", DType::bf16,
      {data(DType::bf16, {3, 100}, seed++), random_tensor(DType::i16, {4, 70}, seed++, -3, 2),
       data(DType::bf16, {4, 70}, seed++)},
      {{"reduction", "max"}}, scatter_elements_ref, "blocks of lines"));
  t.add(ref_check(
      "scatter_elements", DType::f32,
      {tensor_of(DType::f32, {4}, {1, kNaN, -kInf, 2}), tensor_of(DType::i64, {4}, {0, 1, 2, 0}),
       tensor_of(DType::f32, {4}, {kNaN, 3, 1, 5})},
      {{"reduction", "max"}}, scatter_elements_ref, "nan"));
  t.add(ref_check("scatter_elements", DType::f32,
                  {data(DType::f32, {2, 40000}, seed++),
                   random_tensor(DType::i64, {2, 40000}, seed++, 0, 39999),
                   data(DType::f32, {2, 40000}, seed++)},
                  {{"axis", 1}, {"reduction", "add"}}, scatter_elements_ref, "large"));
  t.checks.back().atol = 1e-4;  // f32 sums of values up to 100 that may cancel

  for (DType dt : kAllDTypes)
    for (const char* red : reductions)
      t.add(ref_check("scatter_nd", dt,
                      {small(dt, {5, 4, 3}, 3), random_tensor(DType::i64, {7, 2}, seed++, -4, 3),
                       small(dt, {7, 3}, 2)},
                      {{"reduction", red}}, scatter_nd_ref, "duplicates"));
  for (DType it : kIndexDTypes)
    t.add(ref_check("scatter_nd", DType::f32,
                    {data(DType::f32, {5, 4}, seed++), random_tensor(it, {2, 6, 1}, seed++, -5, 4),
                     data(DType::f32, {2, 6, 4}, seed++)},
                    {{"reduction", "mul"}}, scatter_nd_ref, str_cat("indices ", dtype_name(it))));
  t.add(ref_check("scatter_nd", DType::f32,
                  {data(DType::f32, {5, 4}, seed++), tensor_of(DType::i64, {3, 0}, {}),
                   data(DType::f32, {3, 5, 4}, seed++)},
                  {{"reduction", "add"}}, scatter_nd_ref, "whole-tensor updates"));
  t.add(ref_check("scatter_nd", DType::i32,
                  {data(DType::i32, {5, 4}, seed++), tensor_of(DType::i64, {0, 2}, {}),
                   tensor_of(DType::i32, {0}, {})},
                  {}, scatter_nd_ref, "no updates"));
  t.add(ref_check("scatter_nd", DType::f64,
                  {data(DType::f64, {6, 100000}, seed++), tensor_of(DType::i64, {3, 1}, {1, -1, 1}),
                   data(DType::f64, {3, 100000}, seed++)},
                  {{"reduction", "add"}}, scatter_nd_ref, "large"));
  // Many tuples into a table with repeats (an embedding's gradient): on cuda the tuples
  // sorted by destination, applied in index order still ("none": the last one wins).
  for (const char* red : {"add", "none", "max"}) {
    t.add(ref_check("scatter_nd", DType::f32,
                    {data(DType::f32, {2000, 96}, seed++),
                     random_tensor(DType::i64, {40, 100, 1}, seed++, -2000, 1999),
                     data(DType::f32, {40, 100, 96}, seed++)},
                    {{"reduction", red}}, scatter_nd_ref, "many tuples, repeats"));
    t.checks.back().atol = 1e-4;  // f32 sums of values up to 100
  }
}

void add_sorts(CheckTable& t, uint64_t& seed) {
  // Floats get a spread of values; integers (in [-100, 100]) have ties in 4x10 lines.
  auto input = [&](DType dt, Idx shape) { return random_tensor(dt, shape, seed++, -100, 100); };
  for (DType dt : kAllDTypes) {
    t.add(ref_check("sort", dt, {input(dt, {4, 10})}, {}, sort_ref));
    t.add(ref_check("sort", dt, {input(dt, {6, 3})},
                    {{"axis", 0}, {"descending", true}, {"stable", true}}, sort_ref));
    if (dt == DType::boolean) continue;
    t.add(ref_check("top_k", dt, {input(dt, {4, 10})}, {{"k", 3}}, top_k_ref));
    t.add(ref_check("top_k", dt, {input(dt, {6, 3})}, {{"k", 4}, {"axis", 0}, {"largest", false}},
                    top_k_ref));
  }
  Tensor special = tensor_of(DType::f32, {2, 6},
                             {3, kNaN, -kInf, 3, kInf, -0.0,  //
                              1, 1, kNaN, 0, kNaN, 1});
  for (bool desc : {false, true}) {
    t.add(ref_check("sort", DType::f32, {special}, {{"descending", desc}}, sort_ref, "nan, ties"));
    t.add(ref_check("top_k", DType::f32, {special}, {{"k", 4}, {"largest", desc}}, top_k_ref,
                    "nan, ties"));
  }
  t.add(ref_check("sort", DType::f16, {input(DType::f16, {3, 2, 5})}, {{"axis", 1}}, sort_ref));
  for (bool desc : {false, true}) {
    Tensor ties = random_tensor(DType::i32, {5, 9}, seed++, -2, 2);
    t.add(ref_check("sort", DType::i32, {ties}, {{"descending", desc}}, sort_ref, "ties"));
    t.add(ref_check("top_k", DType::i32, {ties}, {{"k", 5}, {"largest", desc}}, top_k_ref, "ties"));
  }
  t.add(ref_check("sort", DType::i8, {input(DType::i8, {0})}, {}, sort_ref, "empty"));
  t.add(ref_check("sort", DType::f32, {input(DType::f32, {3, 5000})}, {{"descending", true}},
                  sort_ref, "large"));
  t.add(ref_check("top_k", DType::f32, {input(DType::f32, {0})}, {{"k", 0}}, top_k_ref, "empty"));
  t.add(
      ref_check("top_k", DType::i32, {input(DType::i32, {3, 7})}, {{"k", 7}}, top_k_ref, "k = n"));
  t.add(ref_check("top_k", DType::f64, {input(DType::f64, {3, 4, 5})}, {{"k", 2}, {"axis", 1}},
                  top_k_ref));
  OpCheck unsorted = ref_check("top_k", DType::f32, {input(DType::f32, {5, 20})},
                               {{"k", 6}, {"sorted", false}}, nullptr, "unsorted");
  unsorted.verify = top_k_unsorted();
  t.add(unsorted);
}

void add_generators(CheckTable& t, uint64_t& seed) {
  // iota: dtype is its main dtype (coverage swaps it); bool is refused by inference.
  for (DType dt : kAllDTypes) {
    if (is_bool(dt)) continue;
    t.add(ref_check("iota", dt, {}, {{"shape", IntList{2, 3}}, {"axis", -1}, {"dtype", dt}},
                    iota_ref));
  }
  t.add(ref_check("iota", DType::i64, {}, {{"shape", IntList{5}}}, iota_ref));
  t.add(
      ref_check("iota", DType::u8, {}, {{"shape", IntList{0, 3}}, {"dtype", DType::u8}}, iota_ref));
  t.add(ref_check("iota", DType::f32, {},
                  {{"shape", IntList{3, 4, 2}}, {"axis", 1}, {"dtype", DType::f32}}, iota_ref));
  t.add(ref_check("iota", DType::i32, {},
                  {{"shape", IntList{3, 50000}}, {"axis", 1}, {"dtype", DType::i32}}, iota_ref,
                  "large"));

  // one_hot: the indices' dtype is the main one; every output dtype too.
  for (DType it : kIndexDTypes)
    t.add(ref_check("one_hot", it, {random_tensor(it, {4}, seed++, -3, 5)}, {{"depth", 5}},
                    one_hot_ref, "out-of-range indices give all off"));
  for (DType out : kAllDTypes)
    t.add(ref_check("one_hot", DType::i32, {random_tensor(DType::i32, {2, 3}, seed++, -3, 2)},
                    {{"depth", 3}, {"axis", 0}, {"dtype", out}, {"on_value", 5}, {"off_value", -1}},
                    one_hot_ref, str_cat("to ", dtype_name(out))));
  t.add(ref_check("one_hot", DType::u8, {random_tensor(DType::u8, {2, 3}, seed++, 0, 3)},
                  {{"depth", 3}, {"axis", -2}, {"on_value", 5}}, one_hot_ref));
  t.add(ref_check("one_hot", DType::i64, {tensor_of(DType::i64, {}, {0})},
                  {{"depth", 1}, {"dtype", DType::boolean}}, one_hot_ref));
  t.add(ref_check("one_hot", DType::i64, {tensor_of(DType::i64, {0, 2}, {})}, {{"depth", 4}},
                  one_hot_ref, "empty"));

  // nonzero: values in {-1, 0, 1} (so floats have zeros too); NaN and -0.0 below.
  auto sparse = [&](DType dt, Idx shape) {
    return tensor_of(dt, shape, values(random_tensor(DType::i32, shape, seed++, -1, 1)));
  };
  for (DType dt : kAllDTypes) {
    t.add(ref_check("nonzero", dt, {sparse(dt, {3, 4})}, {}, nonzero_ref));
    t.add(ref_check("nonzero", dt, {sparse(dt, {2, 3, 2})}, {}, nonzero_ref));
  }
  t.add(ref_check("nonzero", DType::f32, {tensor_of(DType::f32, {5}, {0, -0.0, kNaN, kInf, 1e-30})},
                  {}, nonzero_ref, "nan, -0"));
  for (double v : {0.0, 3.0})
    t.add(ref_check("nonzero", DType::i32, {tensor_of(DType::i32, {}, {v})}, {}, nonzero_ref,
                    "scalar"));
  t.add(ref_check("nonzero", DType::f32, {tensor_of(DType::f32, {3, 0}, {})}, {}, nonzero_ref,
                  "empty"));
  t.add(ref_check("nonzero", DType::u8, {sparse(DType::u8, {300, 700})}, {}, nonzero_ref, "large"));

  // constant: the literal's bytes, in every dtype.
  for (DType dt : kAllDTypes) {
    Tensor v = data(dt, {2, 3}, seed++);
    Literal lit = v.to_literal();
    t.add(ref_check("constant", dt, {}, {{"value", lit}}, literal_ref(lit)));
  }
  for (const Literal& lit : {Literal::scalar(DType::f16, 1.5), Literal::from<bool>({}, {0, 2})})
    t.add(ref_check("constant", lit.dtype(), {}, {{"value", lit}}, literal_ref(lit)));
}

}  // namespace

// String tensors through the data-movement ops (their handles move like 8-byte integers).
void add_string_moves(CheckTable& t, uint64_t& seed) {
  auto add = [&](const char* op, Tensors in, Attrs a, RefFn ref, const char* note) {
    t.add(
        ref_check(op, DType::string, std::move(in), std::move(a), via_codes(std::move(ref)), note));
  };
  add("transpose", {string_data({2, 3, 4}, seed++)}, {{"perm", IntList{1, 0, 2}}}, transpose_ref,
      "strings");
  add("broadcast_to", {string_data({1, 3}, seed++)}, {{"shape", IntList{4, 2, 3}}}, broadcast_ref,
      "strings");
  add("slice", {string_data({10, 6}, seed++)},
      {{"starts", Idx{1, 5}}, {"stops", Idx{8, 0}}, {"steps", Idx{2, -2}}, {"axes", Idx{}}},
      slice_ref, "strings");
  add("concat", {string_data({2, 3}, seed++), string_data({4, 3}, seed++)}, {{"axis", 0}},
      concat_ref, "strings");
  add("gather", {string_data({5, 4}, seed++), tensor_of(DType::i64, {3}, {4, -1, 0})}, {},
      gather_ref, "strings");
}

// An index out of range is the op's ValueError on every device (found in the data: on a
// GPU after the kernel, read back with the run). Own seeds: the tables above keep theirs.
void add_bad_indices(CheckTable& t) {
  auto x = [](Idx shape, uint64_t seed) { return random_tensor(DType::f32, shape, seed); };
  auto i64 = [](Idx shape, std::vector<double> v) { return tensor_of(DType::i64, shape, v); };
  const char* rows5 = "expected indices in [-5, 5) for axis 0";
  auto bad = [&](const char* op, Tensors in, Attrs attrs, const char* note) {
    OpCheck c = ref_check(op, DType::f32, std::move(in), std::move(attrs), nullptr, note);
    c.error = rows5;
    t.add(std::move(c));
  };
  bad("gather", {x({5, 4}, 9501), i64({3}, {4, 5, 0})}, {}, "index past the end");
  bad("gather", {x({5, 4}, 9502), i64({2}, {-6, 1})}, {}, "index before the start");
  bad("gather_elements", {x({5, 4}, 9503), i64({2, 4}, {0, 1, 2, 3, 4, 7, 0, 1})}, {},
      "index out of range");
  bad("gather_nd", {x({5, 4}, 9504), i64({2, 1}, {1, 5})}, {}, "index out of range");
  bad("scatter_elements", {x({5, 4}, 9505), i64({1, 4}, {0, 1, 5, 2}), x({1, 4}, 9506)}, {},
      "index out of range");
  bad("scatter_nd", {x({5, 4}, 9507), i64({2, 1}, {1, -6}), x({2, 4}, 9508)}, {},
      "index out of range");
}

CheckTable checks_shape() {
  CheckTable t;
  uint64_t seed = 1;
  add_views(t, seed);
  add_movement(t, seed);
  add_concat_split(t, seed);
  add_gathers(t, seed);
  add_scatters(t, seed);
  add_sorts(t, seed);
  add_generators(t, seed);
  add_dynamic_shapes(t, seed);
  add_string_moves(t, seed);
  add_bad_indices(t);
  return t;
}

}  // namespace rlx::test
