// The GGUF writer: version 3, metadata in insertion order, every tensor's data padded to
// the alignment.
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "frontend/gguf/gguf_internal.h"
#include "rlx/error.h"

namespace rlx::gguf {

namespace {

uint64_t padded(uint64_t n, uint64_t a) { return (n + a - 1) / a * a; }

void put_string(std::string& out, const std::string& s) {
  uint64_t n = s.size();
  out.append(reinterpret_cast<const char*>(&n), 8);
  out += s;
}
template <class T>
void put(std::string& out, T v) {
  out.append(reinterpret_cast<const char*>(&v), sizeof(T));
}

}  // namespace

std::span<const uint8_t> Writer::Entry::data() const {
  if (tensor.defined()) return {static_cast<const uint8_t*>(tensor.data()), tensor.nbytes()};
  return bytes;
}

void Writer::set(std::string key, Value value) {
  if (key == "general.alignment") {
    uint64_t a = 0;
    try {
      a = value.as_uint();
    } catch (const Error&) {
      fail<TypeError>("gguf", "expected general.alignment to be an integer, got ",
                      value_type_name(value.type()));
    }
    if (a == 0 || !std::has_single_bit(a) || a > (uint64_t(1) << 30))
      fail<ValueError>("gguf", "expected general.alignment to be a power of two, got ", a);
    alignment_ = a;
  }
  for (auto& [k, v] : meta_)
    if (k == key) {
      v = std::move(value);
      return;
    }
  meta_.emplace_back(std::move(key), std::move(value));
}

void Writer::add_tensor(std::string name, const Tensor& t) {
  if (!t.defined()) fail<ValueError>("gguf", "expected a defined tensor for '", name, "'");
  if (!t.device().is_cpu())
    fail<ValueError>("gguf", "expected a host tensor for '", name, "', got one on ", t.device());
  if (t.rank() > kMaxDims)
    fail<ValueError>("gguf", "expected at most ", kMaxDims, " dims for '", name, "', got ",
                     t.rank());
  uint32_t type = ggml_of_dtype(t.dtype());
  for (const Entry& e : tensors_)
    if (e.name == name)
      fail<ValueError>("gguf", "expected unique tensor names, got '", name, "' twice");
  tensors_.push_back({std::move(name), type, t.shape(), t.contiguous(), {}});
}

void Writer::add_raw(std::string name, uint32_t ggml_type, std::vector<int64_t> shape,
                     std::vector<uint8_t> bytes) {
  if (shape.size() > size_t(kMaxDims))
    fail<ValueError>("gguf", "expected at most ", kMaxDims, " dims for '", name, "', got ",
                     shape.size());
  GgmlType gt = ggml_type_info(ggml_type);
  if (gt.block) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    const int64_t row = shape.empty() ? 1 : shape.back();
    if (row % gt.block != 0 || uint64_t(n / gt.block * gt.size) != bytes.size())
      fail<ValueError>("gguf", "expected ", n / gt.block * gt.size, " bytes of ", gt.name, " for '",
                       name, "' (rows a multiple of ", gt.block, "), got ", bytes.size());
  }
  for (const Entry& e : tensors_)
    if (e.name == name)
      fail<ValueError>("gguf", "expected unique tensor names, got '", name, "' twice");
  tensors_.push_back({std::move(name), ggml_type, std::move(shape), Tensor(), std::move(bytes)});
}

void Writer::write_to(std::ostream& os) const {
  std::string head;
  put(head, kMagic);
  put(head, uint32_t(3));
  put(head, uint64_t(tensors_.size()));
  put(head, uint64_t(meta_.size()));
  for (const auto& [k, v] : meta_) {
    put_string(head, k);
    put(head, uint32_t(v.type()));
    encode_value(v, head);
  }
  uint64_t offset = 0;
  for (const Entry& e : tensors_) {
    put_string(head, e.name);
    put(head, uint32_t(e.shape.size()));
    for (auto d = e.shape.rbegin(); d != e.shape.rend(); ++d) put(head, uint64_t(*d));
    put(head, e.ggml_type);
    put(head, offset);
    offset += padded(e.data().size(), alignment_);
  }
  head.resize(padded(head.size(), alignment_), '\0');
  os.write(head.data(), std::streamsize(head.size()));
  static const char zeros[256] = {};
  for (const Entry& e : tensors_) {
    auto d = e.data();
    os.write(reinterpret_cast<const char*>(d.data()), std::streamsize(d.size()));
    for (uint64_t pad = padded(d.size(), alignment_) - d.size(); pad > 0;) {
      uint64_t n = std::min<uint64_t>(pad, sizeof zeros);
      os.write(zeros, std::streamsize(n));
      pad -= n;
    }
  }
}

void Writer::write(const std::string& path) const {
  // Written beside the target and renamed over it: a reader never sees half a file, and
  // tensors still mapped from `path` (rewriting a file in place) keep their pages.
  const std::string tmp = path + ".tmp";
  errno = 0;
  std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
  if (!out) fail<IoError>("gguf", path, ": expected a writable file, got: ", std::strerror(errno));
  write_to(out);
  out.close();
  if (!out || std::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string err = std::strerror(errno);
    std::remove(tmp.c_str());
    fail<IoError>("gguf", path, ": expected to write the file, got: ", err);
  }
}

std::vector<uint8_t> Writer::bytes() const {
  std::ostringstream os(std::ios::binary);
  write_to(os);
  const std::string s = std::move(os).str();
  return {s.begin(), s.end()};
}

}  // namespace rlx::gguf
