// The .npy header: a Python dict literal such as
//   {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
// parsed and written here; npy.cpp handles the framing and the data.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "rlx/dtype.h"

namespace rlx::detail {

struct NpyHeader {
  std::string descr;  // as written, for messages
  DType dtype = DType::f32;
  bool swap = false;  // big-endian data
  bool fortran = false;
  std::vector<int64_t> shape;
  int64_t numel = 1;
};

// Throws IoError naming `name` on anything but a dict with exactly the keys 'descr',
// 'fortran_order' and 'shape' and values rlx supports.
NpyHeader parse_npy_header(std::span<const uint8_t> text, std::string_view name);

// The dict as NumPy writes it, without padding.
std::string format_npy_header(DType dtype, const std::vector<int64_t>& shape);
// Pads with spaces and a final '\n' so that preamble + header is a multiple of 64 bytes.
std::string pad_npy_header(std::string dict, size_t preamble);

std::string shape_repr(const std::vector<int64_t>& shape);  // Python's: (), (3,), (2, 3)
std::string escape_bytes(std::span<const uint8_t> b);       // printable, \xHH otherwise

}  // namespace rlx::detail
