// The complex family and the FFTs take or give complex values, which the f64 harness does
// not draw or difference yet: their rules (JAX's convention) are checked against finite
// differences through real-valued compositions instead (tests/python/test_fft.py: real
// inputs, complex intermediates, a real loss; vmap against loops).
#include "op_tables/gradcheck.h"

namespace rlx::test {

GradTable grads_complex() {
  GradTable t;
  for (const char* op : {"complex", "real", "imag", "conj", "fft", "ifft", "rfft", "irfft"})
    t.exempt.push_back({op,
                        "complex values: checked through real compositions in "
                        "tests/python/test_fft.py"});
  return t;
}

}  // namespace rlx::test
