// The op-consistency harness: one table per op family of (op, inputs, attrs) checks, each
// with an independent reference (naive loops in double written for the test) or, where
// outputs are not unique (random draws), a property check. run_op_check() runs a check
// as a one-node graph on any device, first with contiguous inputs, then with strided
// views of the same values, and compares with the reference. The CUDA backend runs the
// same tables.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "rlx/rlx.h"
#include "rlx/session.h"

namespace rlx::test {

using Tensors = std::vector<Tensor>;
// Expected outputs, computed from the inputs without rlx's kernels.
using RefFn = std::function<Tensors(const Tensors& inputs, const Attrs& attrs)>;
// For outputs that are not unique: "" when acceptable, else what is wrong.
using VerifyFn =
    std::function<std::string(const Tensors& inputs, const Tensors& outputs, const Attrs& attrs)>;

struct OpCheck {
  std::string op;
  DType dtype;  // the dtype this check covers (the op's main dtype; see the coverage test)
  Tensors inputs;
  Attrs attrs;
  RefFn ref;                           // expected outputs, or
  VerifyFn verify;                     // a property check
  std::vector<SubgraphPtr> subgraphs;  // for control ops
  double rtol = -1, atol = -1;         // < 0: the defaults for the output dtype
  std::string note;                    // what the case covers: "broadcast", "nan", …
  bool strided = true;                 // also run with non-contiguous input views
  // When set, the run must throw an rlx::Error whose message contains this (a bad index
  // found only in the data, …); ref and verify are then unused.
  std::string error;
  VerifyFn verify_gpu;  // with verify: the GPU's check, where it computes otherwise by design
};

// An (op, dtype) the op's type rules accept but the CPU does not cover, with the reason.
struct DTypeExemption {
  std::string op;
  DType dtype;
  std::string reason;
};

struct CheckTable {
  std::vector<OpCheck> checks;
  std::vector<DTypeExemption> exempt;
  void add(OpCheck c) { checks.push_back(std::move(c)); }
  void append(CheckTable other);
};

// max_pool's reference (checks_pool.cpp), which max_pool_blocked's reuses.
Tensors ref_max_pool(const Tensors& in, const Attrs& attrs);

// A check against a reference.
OpCheck ref_check(std::string op, DType dtype, Tensors inputs, Attrs attrs, RefFn ref,
                  std::string note = {});

// String tensors for the checks: words drawn from a small vocabulary (repeats, "" and
// non-ASCII text included).
Tensor string_data(std::vector<int64_t> shape, uint64_t seed);
// The reference of a data-movement op on strings: string inputs coded as i64 (each
// string's index in a vocabulary), `ref` run on the codes, i64 outputs decoded again.
RefFn via_codes(RefFn ref);

// layer_norm's (rms_norm's) reference over [axis, rank) (checks_nn.cpp), which the fused
// norm's reuses.
RefFn trailing_norm_ref(bool rms);

// One table per family (tests/op_tables/checks_<family>.cpp).
CheckTable checks_elementwise();
CheckTable checks_reduce();
CheckTable checks_linalg();
CheckTable checks_shape();
CheckTable checks_conv();  // conv, conv_transpose
CheckTable checks_pool();  // pools, resize
CheckTable checks_nn();
CheckTable checks_random();
CheckTable checks_control();
CheckTable checks_autodiff();  // reshape_like, broadcast_like, stop_gradient, checkpoint
CheckTable checks_fused();     // fused_matmul, fused_conv, fused_layer_norm
CheckTable checks_quant();     // dequantize, quant_matmul
CheckTable checks_llm();       // rope, kv_cache_write, attention_cached, sample

CheckTable checks_region();   // fused_elementwise
CheckTable checks_complex();  // complex, real, imag, conj, complex arithmetic, the FFTs
CheckTable all_checks();

// --- the op tables as gtest parameters ------------------------------------------------
// Every registered op's name (one test per op), and a test name for a parameter
// (characters gtest does not take become '_').
std::vector<std::string> registered_op_names();
std::string test_name_of(std::string param);
// A tensor's elements as bytes, from any device: for bit-exact comparisons.
std::vector<uint8_t> bytes_of(const Tensor& t);

// --- inputs ---------------------------------------------------------------------------
// Deterministic pseudo-random values in [lo, hi] (integers for integer dtypes, 0/1 for
// bool, both parts of complex ones), already representable in `dt`.
Tensor random_tensor(DType dt, std::vector<int64_t> shape, uint64_t seed, double lo = -2,
                     double hi = 2);
// From doubles (rounded to dt); a complex dtype's as (real, imaginary) pairs, as values()
// gives them.
Tensor tensor_of(DType dt, std::vector<int64_t> shape, const std::vector<double>& values);
// The same values in a non-contiguous view (every other element of a wider buffer) on
// `device`.
Tensor strided_copy(const Tensor& t, Device device = Device::cpu());

// --- references ------------------------------------------------------------------------
// Row-major, any layout; a complex tensor's as (real, imaginary) pairs.
std::vector<double> values(const Tensor& t);
// Random complex values (real and imaginary parts in [lo, hi]) of a complex dtype, and a
// complex tensor from (real, imaginary) pairs.
Tensor random_complex(DType dt, std::vector<int64_t> shape, uint64_t seed, double lo = -2,
                      double hi = 2);
Tensor complex_of_pairs(DType dt, std::vector<int64_t> shape, const std::vector<double>& pairs);
std::vector<int64_t> unravel(int64_t flat, const std::vector<int64_t>& shape);
int64_t ravel(const std::vector<int64_t>& index, const std::vector<int64_t>& shape);
// The flat index into `in_shape` that output index `out_index` reads under NumPy
// broadcasting (shapes right-aligned, size-1 dims repeat).
int64_t broadcast_index(const std::vector<int64_t>& out_index,
                        const std::vector<int64_t>& in_shape);
std::vector<int64_t> broadcast_shape(const std::vector<int64_t>& a, const std::vector<int64_t>& b);
// a's dims, then b's.
inline std::vector<int64_t> joined(std::vector<int64_t> a, const std::vector<int64_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

int64_t numel(const std::vector<int64_t>& shape);
// v modulo 2^bits of integer dtype dt, in dt's range (two's complement); v != 0 for bool.
int64_t wrap_int(DType dt, uint64_t v);
// Compiles and runs a one-node graph of `op` (a second, independent compile and run).
Tensors run_graph(const std::string& op, const Tensors& inputs, const Attrs& attrs, Device device);

// Default tolerances per output dtype: (rtol, atol).
std::pair<double, double> default_tolerance(DType dt);

// Runs one check on `device`; returns the failures (empty: it passed).
std::vector<std::string> run_op_check(const OpCheck& c, Device device);
std::string check_label(const OpCheck& c);

}  // namespace rlx::test
