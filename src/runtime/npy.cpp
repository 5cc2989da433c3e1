#include "rlx/npy.h"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <numeric>

#include "runtime/binary_file.h"
#include "runtime/npy_header.h"

namespace rlx {

static_assert(std::endian::native == std::endian::little, "npy I/O assumes a little-endian host");

namespace {

using detail::NpyHeader;

constexpr uint8_t kMagic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};

[[noreturn]] void bad(std::string_view name, const std::string& what) {
  fail<IoError>("npy", name, ": ", what);
}

uint32_t read_le(const uint8_t* p, int bytes) {
  uint32_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

// The magic string, the version and the header length: where the header lies.
struct Preamble {
  size_t header_offset;
  size_t header_len;
};

constexpr size_t kPreambleMin = 10;  // format 1.0; 2.0 and 3.0 take 12

Preamble parse_preamble(std::span<const uint8_t> b, std::string_view name) {
  if (b.size() < 8 || !std::equal(kMagic, kMagic + 6, b.begin()))
    bad(name,
        str_cat("expected the .npy magic string \\x93NUMPY, got ",
                b.size() < 6 ? str_cat(b.size(), " bytes") : detail::escape_bytes(b.first(6))));
  int major = b[6], minor = b[7];
  if (major < 1 || major > 3 || minor != 0)
    bad(name, str_cat("expected format version 1.0, 2.0 or 3.0, got ", major, ".", minor));
  size_t len_bytes = major == 1 ? 2 : 4;
  if (b.size() < 8 + len_bytes)
    bad(name, str_cat("expected a ", 8 + len_bytes, "-byte preamble (truncated header), got ",
                      b.size(), " bytes"));
  return {8 + len_bytes, read_le(b.data() + 8, int(len_bytes))};
}

// The header's extent, checked against the bytes there are.
void check_header_fits(const Preamble& p, size_t total, std::string_view name) {
  if (total - p.header_offset < p.header_len)
    bad(name, str_cat("expected a header of ", p.header_len, " bytes (truncated header), got ",
                      total - p.header_offset));
}

// numel * itemsize against the bytes after the header.
size_t check_data_size(const NpyHeader& h, size_t available, std::string_view name) {
  size_t item = dtype_size(h.dtype);
  uint64_t numel = uint64_t(h.numel);
  if (numel > std::numeric_limits<uint64_t>::max() / item || numel * item > available)
    bad(name, str_cat("expected ", h.numel, " elements of '", h.descr, "' for shape ",
                      detail::shape_repr(h.shape), " (", h.numel, " x ", item,
                      " bytes; truncated data), got ", available, " bytes of data"));
  size_t want = size_t(numel * item);
  if (want != available)
    bad(name, str_cat("expected ", want, " bytes of data for shape ", detail::shape_repr(h.shape),
                      " '", h.descr, "', got ", available, " (the shape does not match the data)"));
  return want;
}

// An empty tensor in storage order: the shape reversed for Fortran order.
Tensor storage_tensor(const NpyHeader& h) {
  std::vector<int64_t> shape = h.shape;
  if (h.fortran) std::reverse(shape.begin(), shape.end());
  return Tensor::empty(h.dtype, shape);
}

// Byte order, bool canonical form and layout, once the raw data is in place.
Tensor finish(Tensor t, const NpyHeader& h) {
  size_t item = dtype_size(h.dtype);
  auto* p = static_cast<uint8_t*>(t.data());
  size_t n = t.nbytes();
  if (h.swap && item > 1)
    for (size_t i = 0; i < n; i += item) std::reverse(p + i, p + i + item);
  if (h.dtype == DType::boolean)
    for (size_t i = 0; i < n; ++i) p[i] = p[i] != 0;
  if (h.fortran && t.rank() > 1) {
    std::vector<int64_t> perm(size_t(t.rank()));
    std::iota(perm.rbegin(), perm.rend(), 0);
    t = t.permute(perm).contiguous();
  }
  return t;
}

std::string sys_error() { return std::strerror(errno); }

}  // namespace

Tensor read_npy(std::span<const uint8_t> bytes, std::string_view name) {
  Preamble pre = parse_preamble(bytes, name);
  check_header_fits(pre, bytes.size(), name);
  NpyHeader h = detail::parse_npy_header(bytes.subspan(pre.header_offset, pre.header_len), name);
  size_t data_offset = pre.header_offset + pre.header_len;
  size_t n = check_data_size(h, bytes.size() - data_offset, name);
  Tensor t = storage_tensor(h);
  if (n) std::memcpy(t.data(), bytes.data() + data_offset, n);
  return finish(std::move(t), h);
}

Tensor load_npy(const std::string& path) {
  detail::BinaryReader in("npy", path);
  size_t total = size_t(in.size());
  std::vector<uint8_t> front(std::min<size_t>(total, 12));
  in.read(front.data(), front.size());
  Preamble pre = parse_preamble(front, path);
  check_header_fits(pre, total, path);
  front.resize(pre.header_offset + pre.header_len);
  if (front.size() > 12) in.read(front.data() + 12, front.size() - 12);
  in.seek(pre.header_offset + pre.header_len);
  NpyHeader h = detail::parse_npy_header(
      std::span<const uint8_t>(front).subspan(pre.header_offset, pre.header_len), path);
  size_t n = check_data_size(h, total - front.size(), path);
  Tensor t = storage_tensor(h);
  if (n) in.read(t.data(), n);
  return finish(std::move(t), h);
}

std::vector<uint8_t> write_npy_bytes(const Tensor& t) {
  if (!t.defined()) fail<ValueError>("npy", "expected a tensor to write, got an undefined one");
  if (!t.device().is_cpu())
    fail<ValueError>("npy", "expected a host tensor to write, got one on ", t.device().str());
  std::string dict = detail::format_npy_header(t.dtype(), t.shape());
  // Format 1.0 stores the header length in 16 bits; 2.0 (12-byte preamble) in 32.
  size_t pre = 10;
  std::string header = detail::pad_npy_header(dict, pre);
  if (header.size() > 65535) header = detail::pad_npy_header(dict, pre = 12);
  Tensor c = t.contiguous();
  std::vector<uint8_t> out(pre + header.size() + c.nbytes());
  std::copy(kMagic, kMagic + 6, out.begin());
  out[6] = pre == 10 ? 1 : 2;
  out[7] = 0;
  for (size_t i = 0; i < pre - 8; ++i) out[8 + i] = uint8_t(header.size() >> (8 * i));
  std::memcpy(out.data() + pre, header.data(), header.size());
  if (c.nbytes()) std::memcpy(out.data() + pre + header.size(), c.data(), c.nbytes());
  return out;
}

void save_npy(const std::string& path, const Tensor& t) {
  std::vector<uint8_t> bytes = write_npy_bytes(t);
  errno = 0;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) bad(path, str_cat("expected a writable file, got: ", sys_error()));
  out.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
  out.flush();
  if (!out) bad(path, str_cat("expected to write ", bytes.size(), " bytes, got a write error"));
}

}  // namespace rlx
