// The GGUF reader: maps the file and validates every length, count and offset against
// the bytes that are there before using (or allocating for) it.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <limits>
#include <unordered_map>
#include <unordered_set>

#include "frontend/gguf/gguf_internal.h"
#include "rlx/error.h"

namespace rlx::gguf {

static_assert(std::endian::native == std::endian::little, "GGUF I/O assumes a little-endian host");

namespace {

// The file's bytes: a private mapping (or an owned vector for from_bytes).
struct Bytes {
  const uint8_t* data = nullptr;
  size_t size = 0;
  void* map = nullptr;  // munmap on destruction
  std::vector<uint8_t> owned;
  Bytes() = default;
  Bytes(const Bytes&) = delete;
  Bytes& operator=(const Bytes&) = delete;
  ~Bytes() {
    if (map) munmap(map, size);
  }
};

// Sequential reads with bounds checks; every failure names the file and the position.
class Cursor {
 public:
  Cursor(const uint8_t* data, size_t size, const std::string& name)
      : p_(data), size_(size), name_(name) {}

  size_t pos() const { return pos_; }
  size_t left() const { return size_ - pos_; }

  [[noreturn]] void bad(const std::string& what) const { fail<IoError>("gguf", name_, ": ", what); }

  template <class T>
  T read(std::string_view what) {
    if (left() < sizeof(T))
      bad(str_cat("expected ", sizeof(T), " bytes of ", what, " at offset ", pos_, ", got ", left(),
                  " (truncated file)"));
    T v;
    std::memcpy(&v, p_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }

  std::string read_string(std::string_view what) {
    uint64_t n = read<uint64_t>(what);
    if (n > left())
      bad(str_cat("expected ", what, " of at most the ", left(), " bytes left at offset ", pos_,
                  ", got a length of ", n));
    std::string s(reinterpret_cast<const char*>(p_ + pos_), size_t(n));
    pos_ += n;
    return s;
  }

  std::vector<uint8_t> read_bytes(uint64_t n, std::string_view what) {
    if (n > left())
      bad(str_cat("expected ", n, " bytes of ", what, " at offset ", pos_, ", got ", left(),
                  " (truncated file)"));
    std::vector<uint8_t> v(p_ + pos_, p_ + pos_ + n);
    pos_ += n;
    return v;
  }

 private:
  const uint8_t* p_;
  size_t size_;
  size_t pos_ = 0;
  const std::string& name_;
};

ValueType read_type(Cursor& c, std::string_view what) {
  uint32_t t = c.read<uint32_t>(what);
  if (!valid_value_type(t))
    c.bad(str_cat("expected a metadata value type (0-12) for ", what, ", got ", t));
  return ValueType(t);
}

Value read_value(Cursor& c, ValueType t, const std::string& key, int depth);

Value read_array(Cursor& c, const std::string& key, int depth) {
  if (depth > kMaxArrayDepth)
    c.bad(str_cat("expected arrays nested at most ", kMaxArrayDepth, " deep in '", key,
                  "', got deeper"));
  ValueType elem = read_type(c, str_cat("the element type of '", key, "'"));
  uint64_t n = c.read<uint64_t>("an array length");
  // Each element takes at least this many bytes, so the count cannot exceed what is left.
  uint64_t min_size = elem == ValueType::string  ? 8
                      : elem == ValueType::array ? 12
                                                 : scalar_size(elem);
  if (n > c.left() / min_size)
    c.bad(str_cat("expected an array of at most ", c.left() / min_size, " elements for '", key,
                  "' (the bytes left), got a length of ", n));
  if (elem == ValueType::string) {
    std::vector<std::string> s;
    s.reserve(size_t(n));
    for (uint64_t i = 0; i < n; ++i)
      s.push_back(c.read_string(str_cat("an element of '", key, "'")));
    return ValueAccess::string_array(std::move(s));
  }
  if (elem == ValueType::array) {
    std::vector<Value> items;
    items.reserve(size_t(n));
    for (uint64_t i = 0; i < n; ++i) items.push_back(read_array(c, key, depth + 1));
    return ValueAccess::nested(elem, std::move(items));
  }
  return ValueAccess::raw_array(elem, c.read_bytes(n * min_size, str_cat("'", key, "'")));
}

Value read_value(Cursor& c, ValueType t, const std::string& key, int depth) {
  if (t == ValueType::string) return Value(c.read_string(str_cat("the value of '", key, "'")));
  if (t == ValueType::array) return read_array(c, key, depth + 1);
  const size_t n = scalar_size(t);
  if (c.left() < n)
    c.bad(str_cat("expected ", n, " bytes for the value of '", key, "' at offset ", c.pos(),
                  ", got ", c.left(), " (truncated file)"));
  uint64_t bits = 0;
  auto b = c.read_bytes(n, key);
  std::memcpy(&bits, b.data(), n);
  return ValueAccess::scalar(t, bits);
}

}  // namespace

struct File::Impl {
  std::string name;
  std::shared_ptr<Bytes> bytes;
  uint32_t version = 0;
  uint64_t alignment = kDefaultAlignment;
  uint64_t data_offset = 0;
  std::vector<std::pair<std::string, Value>> meta;
  std::unordered_map<std::string, size_t> meta_index;
  std::vector<TensorInfo> tensors;
  std::unordered_map<std::string, size_t> tensor_index;

  void parse();
};

void File::Impl::parse() {
  Cursor c(bytes->data, bytes->size, name);
  uint32_t magic = c.read<uint32_t>("the magic");
  if (magic != kMagic) {
    std::string got;
    for (int i = 0; i < 4; ++i) {
      char ch = char((magic >> (8 * i)) & 0xFF);
      got += (ch >= 32 && ch < 127) ? std::string(1, ch) : str_cat("\\x", int(uint8_t(ch)));
    }
    c.bad(str_cat("expected the magic \"GGUF\", got \"", got, "\""));
  }
  version = c.read<uint32_t>("the version");
  if (version != 2 && version != 3) {
    const uint32_t swapped = __builtin_bswap32(version);
    if (swapped == 2 || swapped == 3)
      c.bad(str_cat("expected a little-endian GGUF file, got a big-endian one (version ", swapped,
                    ")"));
    c.bad(str_cat("expected GGUF version 2 or 3, got ", version));
  }
  const uint64_t n_tensors = c.read<uint64_t>("the tensor count");
  const uint64_t n_kv = c.read<uint64_t>("the metadata count");
  // A key-value pair takes at least 8 + 4 + 1 bytes, a tensor info 8 + 4 + 4 + 8.
  if (n_kv > c.left() / 13)
    c.bad(str_cat("expected at most ", c.left() / 13, " metadata entries (the bytes left), got ",
                  n_kv));
  if (n_tensors > c.left() / 24)
    c.bad(
        str_cat("expected at most ", c.left() / 24, " tensors (the bytes left), got ", n_tensors));

  meta.reserve(size_t(n_kv));
  for (uint64_t i = 0; i < n_kv; ++i) {
    std::string key = c.read_string("a metadata key");
    ValueType t = read_type(c, str_cat("the type of '", key, "'"));
    Value v = read_value(c, t, key, 0);
    if (!meta_index.emplace(key, meta.size()).second)
      c.bad(str_cat("expected unique metadata keys, got '", key, "' twice"));
    meta.emplace_back(std::move(key), std::move(v));
  }
  if (auto it = meta_index.find("general.alignment"); it != meta_index.end()) {
    const Value& v = meta[it->second].second;
    uint64_t a = 0;
    try {
      a = v.as_uint();
    } catch (const Error&) {
      c.bad(str_cat("expected general.alignment to be a non-negative integer, got a ",
                    value_type_name(v.type())));
    }
    if (a == 0 || !std::has_single_bit(a) || a > (uint64_t(1) << 30))
      c.bad(str_cat("expected general.alignment to be a power of two, got ", a));
    alignment = a;
  }

  tensors.reserve(size_t(n_tensors));
  for (uint64_t i = 0; i < n_tensors; ++i) {
    TensorInfo ti;
    ti.name = c.read_string("a tensor name");
    const uint32_t n_dims = c.read<uint32_t>(str_cat("the dim count of '", ti.name, "'"));
    if (n_dims > uint32_t(kMaxDims))
      c.bad(
          str_cat("expected at most ", kMaxDims, " dims for tensor '", ti.name, "', got ", n_dims));
    // numel with overflow checks: each dim and the product must fit int64.
    int64_t numel = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      uint64_t e = c.read<uint64_t>(str_cat("the dims of '", ti.name, "'"));
      if (e > uint64_t(std::numeric_limits<int64_t>::max()) ||
          (e != 0 && uint64_t(numel) > uint64_t(std::numeric_limits<int64_t>::max()) / e))
        c.bad(str_cat("expected the dims of tensor '", ti.name,
                      "' to have a product that fits int64, got a dim of ", e));
      numel *= int64_t(e);
      ti.ne.push_back(int64_t(e));
    }
    ti.shape.assign(ti.ne.rbegin(), ti.ne.rend());
    ti.ggml_type = c.read<uint32_t>(str_cat("the type of '", ti.name, "'"));
    ti.dtype = dtype_of_ggml(ti.ggml_type);
    ti.offset = c.read<uint64_t>(str_cat("the offset of '", ti.name, "'"));

    GgmlType gt = ggml_type_info(ti.ggml_type);
    if (gt.block) {
      const int64_t row = ti.ne.empty() ? 1 : ti.ne[0];
      if (row % gt.block != 0)
        c.bad(str_cat("expected the row length of tensor '", ti.name, "' (", gt.name,
                      ") to be a multiple of ", gt.block, ", got ", row));
      // numel / block * size cannot overflow: size <= 292 and numel / block < 2^63 / 1.
      const uint64_t blocks = uint64_t(numel / gt.block);
      if (blocks > std::numeric_limits<uint64_t>::max() / uint64_t(gt.size))
        c.bad(
            str_cat("expected tensor '", ti.name, "' to fit in the file, got ", numel, " values"));
      ti.nbytes = blocks * uint64_t(gt.size);
    }
    if (ti.offset % alignment != 0)
      c.bad(str_cat("expected the offset of tensor '", ti.name, "' to be a multiple of ", alignment,
                    ", got ", ti.offset));
    if (!tensor_index.emplace(ti.name, tensors.size()).second)
      c.bad(str_cat("expected unique tensor names, got '", ti.name, "' twice"));
    tensors.push_back(std::move(ti));
  }

  data_offset = (uint64_t(c.pos()) + alignment - 1) / alignment * alignment;
  const uint64_t data_size = data_offset <= bytes->size ? bytes->size - data_offset : 0;
  for (const TensorInfo& ti : tensors) {
    if (ti.nbytes == 0) continue;
    if (data_offset > bytes->size || ti.offset > data_size || ti.nbytes > data_size - ti.offset)
      c.bad(str_cat("expected tensor '", ti.name, "' (", ti.nbytes, " bytes at data offset ",
                    ti.offset, ") within the ", data_size,
                    " bytes of data, got one extending past ", "the end of the file"));
  }
}

File File::open(const std::string& path) {
  auto impl = std::make_shared<Impl>();
  impl->name = path;
  impl->bytes = std::make_shared<Bytes>();
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    fail<IoError>("gguf", path, ": expected a readable file, got: ", std::strerror(errno));
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    fail<IoError>("gguf", path, ": expected a regular file, got ",
                  S_ISDIR(st.st_mode) ? "a directory" : "something else");
  }
  Bytes& b = *impl->bytes;
  b.size = size_t(st.st_size);
  if (b.size > 0) {
    // Private and writable: pages stay shared with the page cache until written, and a
    // write through a wrapped tensor never reaches the file (nor faults). NORESERVE: no
    // commit charge for the whole file (a model larger than RAM + swap still maps).
    void* m = mmap(nullptr, b.size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_NORESERVE, fd, 0);
    if (m == MAP_FAILED) {
      int err = errno;
      ::close(fd);
      fail<IoError>("gguf", path,
                    ": expected a file that can be mapped, got: ", std::strerror(err));
    }
    b.map = m;
    b.data = static_cast<const uint8_t*>(m);
  }
  ::close(fd);
  impl->parse();
  File f;
  f.impl_ = std::move(impl);
  return f;
}

File File::from_bytes(std::vector<uint8_t> bytes, std::string name) {
  auto impl = std::make_shared<Impl>();
  impl->name = std::move(name);
  impl->bytes = std::make_shared<Bytes>();
  impl->bytes->owned = std::move(bytes);
  impl->bytes->data = impl->bytes->owned.data();
  impl->bytes->size = impl->bytes->owned.size();
  impl->parse();
  File f;
  f.impl_ = std::move(impl);
  return f;
}

const std::string& File::path() const { return impl_->name; }
uint32_t File::version() const { return impl_->version; }
uint64_t File::alignment() const { return impl_->alignment; }
uint64_t File::data_offset() const { return impl_->data_offset; }
size_t File::file_size() const { return impl_->bytes->size; }

const std::vector<std::pair<std::string, Value>>& File::metadata() const { return impl_->meta; }

const Value* File::find_value(std::string_view key) const {
  auto it = impl_->meta_index.find(std::string(key));
  return it == impl_->meta_index.end() ? nullptr : &impl_->meta[it->second].second;
}

bool File::has(std::string_view key) const { return find_value(key) != nullptr; }

const Value& File::get(std::string_view key) const {
  const Value* v = find_value(key);
  if (!v) fail<ValueError>("gguf", impl_->name, ": expected metadata key '", key, "', got none");
  return *v;
}

namespace {
// Runs a Value accessor, re-raising its TypeError / ValueError with the key and file.
template <class F>
auto keyed(const std::string& file, std::string_view key, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const TypeError& e) {
    fail<TypeError>("gguf", file, ": metadata '", key, "': ", e.what());
  } catch (const ValueError& e) {
    fail<ValueError>("gguf", file, ": metadata '", key, "': ", e.what());
  }
}
}  // namespace

int64_t File::get_int(std::string_view key) const {
  return keyed(impl_->name, key, [&] { return get(key).as_int(); });
}
int64_t File::get_int(std::string_view key, int64_t fallback) const {
  return has(key) ? get_int(key) : fallback;
}
double File::get_float(std::string_view key) const {
  return keyed(impl_->name, key, [&] { return get(key).as_float(); });
}
double File::get_float(std::string_view key, double fallback) const {
  return has(key) ? get_float(key) : fallback;
}
bool File::get_bool(std::string_view key) const {
  return keyed(impl_->name, key, [&] { return get(key).as_bool(); });
}
bool File::get_bool(std::string_view key, bool fallback) const {
  return has(key) ? get_bool(key) : fallback;
}
std::string File::get_string(std::string_view key) const {
  return keyed(impl_->name, key, [&] { return get(key).as_string(); });
}
std::string File::get_string(std::string_view key, std::string_view fallback) const {
  return has(key) ? get_string(key) : std::string(fallback);
}
const std::vector<std::string>& File::get_strings(std::string_view key) const {
  return keyed(impl_->name, key,
               [&]() -> const std::vector<std::string>& { return get(key).as_strings(); });
}
std::vector<int64_t> File::get_ints(std::string_view key) const {
  return keyed(impl_->name, key, [&] { return get(key).as_ints(); });
}
std::vector<double> File::get_floats(std::string_view key) const {
  return keyed(impl_->name, key, [&] { return get(key).as_floats(); });
}

const std::vector<TensorInfo>& File::tensors() const { return impl_->tensors; }

const TensorInfo* File::find(std::string_view name) const {
  auto it = impl_->tensor_index.find(std::string(name));
  return it == impl_->tensor_index.end() ? nullptr : &impl_->tensors[it->second];
}

std::span<const uint8_t> File::tensor_bytes(const TensorInfo& info) const {
  if (!ggml_type_info(info.ggml_type).block)
    fail<NotSupported>("gguf", impl_->name, ": tensor '", info.name,
                       "': expected a known ggml type, got ", ggml_type_name(info.ggml_type));
  // An empty tensor's offset is not checked against the file (it reads nothing): its span
  // starts at the data section.
  uint64_t at = impl_->data_offset + (info.nbytes ? info.offset : 0);
  return {impl_->bytes->data + std::min<uint64_t>(at, impl_->bytes->size), size_t(info.nbytes)};
}

Tensor File::tensor(std::string_view name) const {
  const TensorInfo* info = find(name);
  if (!info) fail<ValueError>("gguf", impl_->name, ": expected a tensor '", name, "', got none");
  if (!info->dtype)
    fail<NotSupported>("gguf", impl_->name, ": tensor '", info->name,
                       "': expected a ggml type rlx implements (F32 F16 BF16 F64 I8-I64 Q4_0 "
                       "Q4_1 Q5_0 Q5_1 Q8_0 Q2_K-Q6_K), got ",
                       ggml_type_name(info->ggml_type));
  auto data = tensor_bytes(*info);
  // The release holds the mapping: the tensor outlives this File if it needs to.
  std::shared_ptr<Bytes> keep = impl_->bytes;
  return Tensor::wrap(*info->dtype, info->shape, const_cast<uint8_t*>(data.data()),
                      [keep](void*) {});
}

}  // namespace rlx::gguf
