#include "op_tables/consistency.h"

#include <cctype>
#include <cmath>
#include <cstring>
#include <map>

namespace rlx::test {

void CheckTable::append(CheckTable other) {
  for (auto& c : other.checks) checks.push_back(std::move(c));
  for (auto& e : other.exempt) exempt.push_back(std::move(e));
}

OpCheck ref_check(std::string op, DType dtype, Tensors inputs, Attrs attrs, RefFn ref,
                  std::string note) {
  OpCheck c{std::move(op), dtype, std::move(inputs), std::move(attrs), std::move(ref)};
  c.note = std::move(note);
  return c;
}

Tensor string_data(std::vector<int64_t> shape, uint64_t seed) {
  static const char* const kWords[] = {"", "a", "monday", "Tuesday", "naïve", "日本", "x y", "0.5"};
  Tensor codes = random_tensor(DType::i64, shape, seed, 0, 7);
  std::vector<std::string> words;
  for (double c : codes.to_doubles()) words.push_back(kWords[int(c)]);
  return Tensor::from_strings(words, std::move(shape));
}

RefFn via_codes(RefFn ref) {
  return [ref](const Tensors& in, const Attrs& a) {
    std::vector<std::string> vocab;
    std::map<std::string, int64_t> code;
    Tensors coded;
    for (const Tensor& x : in) {
      if (!is_string(x.dtype())) {
        coded.push_back(x);
        continue;
      }
      std::vector<double> v;
      for (const std::string& s : x.to_strings()) {
        auto [it, fresh] = code.emplace(s, int64_t(vocab.size()));
        if (fresh) vocab.push_back(s);
        v.push_back(double(it->second));
      }
      coded.push_back(tensor_of(DType::i64, x.shape(), v));
    }
    Tensors out = ref(coded, a);
    for (Tensor& y : out) {
      if (y.dtype() != DType::i64) continue;
      std::vector<std::string> words;
      for (int64_t c : y.to_vector<int64_t>()) words.push_back(vocab.at(size_t(c)));
      y = Tensor::from_strings(words, y.shape());
    }
    return out;
  };
}

CheckTable all_checks() {
  CheckTable t;
  for (auto* f : {checks_elementwise, checks_reduce, checks_linalg, checks_shape, checks_conv,
                  checks_pool, checks_nn, checks_random, checks_control, checks_autodiff,
                  checks_fused, checks_quant, checks_llm, checks_region, checks_complex})
    t.append(f());
  return t;
}

namespace {

uint64_t splitmix(uint64_t& s) {
  uint64_t z = (s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Copies element i of src (any layout) to element i of dst (any layout), byte-wise.
void copy_elements(const Tensor& src, Tensor& dst) {
  size_t es = dtype_size(src.dtype());
  int64_t n = src.numel();
  for (int64_t i = 0; i < n; ++i) {
    auto idx = unravel(i, src.shape());
    int64_t so = 0, d_o = 0;
    for (size_t d = 0; d < idx.size(); ++d) {
      so += idx[d] * src.strides()[d];
      d_o += idx[d] * dst.strides()[d];
    }
    std::memcpy(static_cast<char*>(dst.data()) + d_o * int64_t(es),
                static_cast<const char*>(src.data()) + so * int64_t(es), es);
  }
}

std::string shapes_str(const Tensors& ts) {
  std::string s;
  for (const auto& t : ts) {
    if (!s.empty()) s += ",";
    s += t.type().str();
  }
  return s;
}

bool close(double got, double want, double rtol, double atol) {
  if (std::isnan(want)) return std::isnan(got);
  if (std::isinf(want)) return got == want;
  if (!std::isfinite(got)) return false;
  return std::fabs(got - want) <= atol + rtol * std::fabs(want);
}

void compare(const OpCheck& c, const Tensors& want, const Tensors& got, const std::string& how,
             std::vector<std::string>& failures) {
  if (want.size() != got.size()) {
    failures.push_back(str_cat(how, ": expected ", want.size(), " outputs, got ", got.size()));
    return;
  }
  for (size_t k = 0; k < want.size(); ++k) {
    if (want[k].type().str() != got[k].type().str()) {
      failures.push_back(str_cat(how, ": output ", k, ": expected ", want[k].type().str(), ", got ",
                                 got[k].type().str()));
      continue;
    }
    if (is_string(want[k].dtype())) {
      std::vector<std::string> w = want[k].to_strings(), g = got[k].to_strings();
      for (size_t i = 0; i < w.size(); ++i)
        if (w[i] != g[i])
          failures.push_back(str_cat(how, ": output ", k, " at ",
                                     ints_str(unravel(int64_t(i), want[k].shape())),
                                     ": expected \"", w[i], "\", got \"", g[i], "\""));
      continue;
    }
    auto [rtol, atol] = default_tolerance(want[k].dtype());
    if (c.rtol >= 0) rtol = c.rtol;
    if (c.atol >= 0) atol = c.atol;
    auto w = values(want[k]), g = values(got[k]);
    const bool parts = is_complex(want[k].dtype());  // values: (re, im) pairs
    int bad = 0;
    for (size_t i = 0; i < w.size(); ++i) {
      if (close(g[i], w[i], rtol, atol)) continue;
      if (++bad <= 3)
        failures.push_back(str_cat(how, ": output ", k, " at ",
                                   ints_str(unravel(int64_t(parts ? i / 2 : i), want[k].shape())),
                                   parts ? (i % 2 ? " (imag)" : " (real)") : "", ": expected ",
                                   w[i], ", got ", g[i]));
    }
    if (bad > 3) failures.push_back(str_cat(how, ": output ", k, ": ", bad, " mismatches in all"));
  }
}

}  // namespace

Tensor random_tensor(DType dt, std::vector<int64_t> shape, uint64_t seed, double lo, double hi) {
  if (is_complex(dt)) return random_complex(dt, std::move(shape), seed, lo, hi);
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::vector<double> v(size_t(std::max<int64_t>(n, 0)));
  uint64_t s = seed * 0x2545f4914f6cdd1dull + 1;
  if (!is_signed(dt)) lo = std::max(lo, 0.0);
  for (auto& x : v) {
    double u = double(splitmix(s) >> 11) * 0x1.0p-53;
    if (is_bool(dt))
      x = u < 0.5 ? 0 : 1;
    else if (is_integer(dt))
      x = std::floor(lo + u * (hi - lo + 1));
    else
      x = lo + u * (hi - lo);
  }
  return Tensor::from_doubles(dt, std::move(shape), v);
}

Tensor tensor_of(DType dt, std::vector<int64_t> shape, const std::vector<double>& values) {
  if (is_complex(dt)) return complex_of_pairs(dt, std::move(shape), values);
  return Tensor::from_doubles(dt, std::move(shape), values);
}

Tensor strided_copy(const Tensor& t, Device device) {
  if (t.rank() == 0 || t.numel() < 2) return t.to(device);
  std::vector<int64_t> wide = t.shape();
  int64_t last = int64_t(wide.size()) - 1;
  wide[size_t(last)] *= 2;
  Tensor base = Tensor::zeros(t.dtype(), wide);
  Tensor view = base.slice(last, 0, wide[size_t(last)], 2);
  copy_elements(t, view);
  return base.to(device).slice(last, 0, wide[size_t(last)], 2);
}

std::vector<double> values(const Tensor& t) {
  if (!is_complex(t.dtype())) return t.to_doubles();
  const Tensor c = t.to(Device::cpu()).contiguous();
  std::vector<double> out;
  const size_t es = dtype_size(c.dtype());
  for (int64_t i = 0; i < c.numel(); ++i) {
    const ComplexValue v =
        load_complex(c.dtype(), static_cast<const char*>(c.data()) + size_t(i) * es);
    out.push_back(v.re);
    out.push_back(v.im);
  }
  return out;
}

std::vector<int64_t> unravel(int64_t flat, const std::vector<int64_t>& shape) {
  std::vector<int64_t> idx(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    if (shape[d] > 0) {
      idx[d] = flat % shape[d];
      flat /= shape[d];
    }
  }
  return idx;
}

int64_t ravel(const std::vector<int64_t>& index, const std::vector<int64_t>& shape) {
  int64_t flat = 0;
  for (size_t d = 0; d < shape.size(); ++d) flat = flat * shape[d] + index[d];
  return flat;
}

int64_t broadcast_index(const std::vector<int64_t>& out_index,
                        const std::vector<int64_t>& in_shape) {
  size_t off = out_index.size() - in_shape.size();
  int64_t flat = 0;
  for (size_t d = 0; d < in_shape.size(); ++d)
    flat = flat * in_shape[d] + (in_shape[d] == 1 ? 0 : out_index[off + d]);
  return flat;
}

std::vector<int64_t> broadcast_shape(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  std::vector<int64_t> out(std::max(a.size(), b.size()), 1);
  for (size_t i = 0; i < out.size(); ++i) {
    int64_t x = i < a.size() ? a[a.size() - 1 - i] : 1;
    int64_t y = i < b.size() ? b[b.size() - 1 - i] : 1;
    out[out.size() - 1 - i] = x == 1 ? y : x;
  }
  return out;
}

int64_t numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

int64_t wrap_int(DType dt, uint64_t v) {
  if (is_bool(dt)) return v != 0;
  int bits = int(dtype_size(dt)) * 8;
  if (bits < 64) v &= (uint64_t(1) << bits) - 1;
  if (is_signed_integer(dt) && bits < 64 && (v >> (bits - 1)))
    return int64_t(v) - (int64_t(1) << bits);
  return int64_t(v);
}

Tensors run_graph(const std::string& op, const Tensors& inputs, const Attrs& attrs, Device device) {
  Graph g("rerun");
  std::vector<Value> ins;
  for (size_t i = 0; i < inputs.size(); ++i)
    ins.push_back(g.input(str_cat("x", i), inputs[i].type()));
  for (Value v : g.apply(op, ins, attrs)) g.output(v);
  return Session(device).compile(g).run(std::span<const Tensor>(inputs));
}

std::pair<double, double> default_tolerance(DType dt) {
  switch (dt) {
    case DType::f64:
    case DType::c128:
      return {1e-12, 1e-12};
    case DType::f32:
    case DType::c64:
      return {1e-5, 1e-6};
    case DType::f16:
      return {4e-3, 1e-3};
    case DType::bf16:
      return {3e-2, 1e-2};
    default:
      return {0, 0};
  }
}

std::string check_label(const OpCheck& c) {
  std::string attrs;
  for (const auto& [k, v] : c.attrs)
    attrs += str_cat(attrs.empty() ? " {" : ", ", k, "=", attr_str(v));
  if (!attrs.empty()) attrs += "}";
  return str_cat(c.op, "(", shapes_str(c.inputs), ")", attrs,
                 c.note.empty() ? "" : " [" + c.note + "]");
}

std::vector<std::string> run_op_check(const OpCheck& c, Device device) {
  std::vector<std::string> failures;
  try {
    Graph g("check");
    std::vector<Value> ins;
    for (size_t i = 0; i < c.inputs.size(); ++i)
      ins.push_back(g.input(str_cat("x", i), c.inputs[i].type()));
    auto outs = g.apply(c.op, ins, c.attrs, c.subgraphs);
    for (Value v : outs) g.output(v);
    const Attrs& attrs = g.nodes().back().attrs;  // complete, defaults filled in
    CompiledGraph cg = Session(device).compile(g);

    auto check = [&](const Tensors& inputs, const std::string& how) {
      if (!c.error.empty()) {
        try {
          cg.run(std::span<const Tensor>(inputs));
          failures.push_back(
              str_cat(how, ": expected an error containing '", c.error, "', got none"));
        } catch (const Error& e) {
          if (std::string(e.what()).find(c.error) == std::string::npos)
            failures.push_back(
                str_cat(how, ": expected an error containing '", c.error, "', got: ", e.what()));
        }
        return;
      }
      Tensors got = cg.run(std::span<const Tensor>(inputs));
      for (Tensor& t : got) t = t.to(Device::cpu());
      if (c.verify) {
        const VerifyFn& verify = !device.is_cpu() && c.verify_gpu ? c.verify_gpu : c.verify;
        std::string msg = verify(c.inputs, got, attrs);  // the host copies
        if (!msg.empty()) failures.push_back(str_cat(how, ": ", msg));
      } else {
        compare(c, c.ref(c.inputs, attrs), got, how, failures);
      }
    };
    // On a device the inputs start there, as a device program's would.
    Tensors contiguous;
    for (const auto& t : c.inputs) contiguous.push_back(t.to(device));
    check(contiguous, "contiguous");
    if (c.strided) {
      Tensors strided;
      bool any = false;
      for (const auto& t : c.inputs) {
        strided.push_back(strided_copy(t, device));
        any |= !strided.back().is_contiguous();
      }
      if (any) check(strided, "strided");
    }
  } catch (const std::exception& e) {
    failures.push_back(str_cat("threw: ", e.what()));
  }
  return failures;
}

std::vector<std::string> registered_op_names() {
  std::vector<std::string> names;
  for (const OpDef* d : OpRegistry::global().all()) names.push_back(d->name);
  return names;
}

std::string test_name_of(std::string param) {
  for (char& ch : param)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return param;
}

std::vector<uint8_t> bytes_of(const Tensor& t) {
  Tensor h = t.to(Device::cpu()).contiguous();
  const auto* p = static_cast<const uint8_t*>(h.data());
  return {p, p + h.nbytes()};
}

}  // namespace rlx::test
