#include "rlx/safetensors.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "runtime/binary_file.h"

namespace rlx {

static_assert(std::endian::native == std::endian::little,
              "safetensors I/O assumes a little-endian host");

namespace {

using json = nlohmann::json;
using ordered_json = nlohmann::ordered_json;

constexpr const char* kMetadataKey = "__metadata__";

[[noreturn]] void bad(std::string_view name, const std::string& what) {
  fail<IoError>("safetensors", name, ": ", what);
}

std::string sys_error() { return std::strerror(errno); }

struct DTypeName {
  DType dtype;
  std::string_view name;
  int rank;  // position in the Rust crate's Dtype enum, which orders the layout
};
constexpr DTypeName kDTypeNames[] = {{DType::boolean, "BOOL", 0}, {DType::u8, "U8", 1},
                                     {DType::i8, "I8", 2},        {DType::i16, "I16", 5},
                                     {DType::f16, "F16", 7},      {DType::bf16, "BF16", 8},
                                     {DType::i32, "I32", 9},      {DType::f32, "F32", 11},
                                     {DType::f64, "F64", 12},     {DType::i64, "I64", 13}};

int layout_rank(DType dt) {
  for (auto& d : kDTypeNames)
    if (d.dtype == dt) return d.rank;
  return -1;
}

std::optional<DType> dtype_from_safetensors(std::string_view s) {
  for (auto& d : kDTypeNames)
    if (d.name == s) return d.dtype;
  return std::nullopt;
}

// One tensor's entry in the header, validated.
struct Entry {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  uint64_t begin, end;  // relative to the data start
};

struct Layout {
  std::vector<Entry> entries;  // sorted by offset
  std::map<std::string, std::string> metadata;
};

std::string shape_repr(const std::vector<int64_t>& s) { return ints_str(s); }

std::map<std::string, std::string> parse_metadata(const json& j, std::string_view name) {
  if (!j.is_object())
    bad(name,
        str_cat("expected \"__metadata__\" to be an object of strings, got a ", j.type_name()));
  std::map<std::string, std::string> out;
  for (auto& [k, v] : j.items()) {
    if (!v.is_string())
      bad(name,
          str_cat("expected metadata value \"", k, "\" to be a string, got a ", v.type_name()));
    out[k] = v.get<std::string>();
  }
  return out;
}

uint64_t as_offset(const json& v, const std::string& tensor, std::string_view name) {
  if (!v.is_number_unsigned())
    bad(name, str_cat("expected data_offsets of '", tensor, "' to be non-negative integers, got ",
                      v.dump()));
  return v.get<uint64_t>();
}

Entry parse_entry(const std::string& key, const json& j, uint64_t data_size,
                  std::string_view name) {
  if (!j.is_object())
    bad(name, str_cat("expected tensor '", key,
                      "' to be an object {dtype, shape, data_offsets}, got a ", j.type_name()));
  Entry e{key, DType::f32, {}, 0, 0};
  auto dt = j.find("dtype");
  if (dt == j.end() || !dt->is_string())
    bad(name, str_cat("expected a string \"dtype\" for tensor '", key, "', got ",
                      dt == j.end() ? std::string("none") : dt->dump()));
  auto parsed = dtype_from_safetensors(dt->get<std::string>());
  if (!parsed)
    bad(name, str_cat("expected the dtype of '", key,
                      "' to be one of F32 F64 F16 BF16 I8 I16 I32 I64 U8 BOOL, got \"",
                      dt->get<std::string>(), "\""));
  e.dtype = *parsed;

  auto shape = j.find("shape");
  if (shape == j.end() || !shape->is_array())
    bad(name, str_cat("expected a \"shape\" array for tensor '", key, "', got ",
                      shape == j.end() ? std::string("none") : shape->dump()));
  // numel * item size, guarding against overflow of the declared shape.
  uint64_t bytes = dtype_size(e.dtype);
  for (const json& d : *shape) {
    if (!d.is_number_unsigned() || d.get<uint64_t>() > uint64_t(INT64_MAX))
      bad(name, str_cat("expected the shape of '", key, "' to hold non-negative integers, got ",
                        shape->dump()));
    uint64_t n = d.get<uint64_t>();
    e.shape.push_back(int64_t(n));
    if (n != 0 && bytes > std::numeric_limits<uint64_t>::max() / n)
      bytes = std::numeric_limits<uint64_t>::max();  // certainly more than the data
    else
      bytes *= n;
  }

  auto offs = j.find("data_offsets");
  if (offs == j.end() || !offs->is_array() || offs->size() != 2)
    bad(name, str_cat("expected \"data_offsets\": [begin, end] for tensor '", key, "', got ",
                      offs == j.end() ? std::string("none") : offs->dump()));
  e.begin = as_offset((*offs)[0], key, name);
  e.end = as_offset((*offs)[1], key, name);
  if (e.begin > e.end || e.end > data_size)
    bad(name, str_cat("expected data_offsets of '", key, "' within the ", data_size,
                      " bytes of data (begin <= end), got [", e.begin, ", ", e.end, "]"));
  if (e.end - e.begin != bytes)
    bad(name, str_cat("expected ", bytes, " bytes for '", key, "' (", dt->get<std::string>(), " ",
                      shape_repr(e.shape), "), got data_offsets [", e.begin, ", ", e.end, "] (",
                      e.end - e.begin, " bytes)"));
  return e;
}

// The offsets must tile [0, data_size) exactly, as the format requires.
void check_tiling(const std::vector<Entry>& entries, uint64_t data_size, std::string_view name) {
  uint64_t at = 0;
  const Entry* prev = nullptr;
  for (const Entry& e : entries) {
    if (e.begin < at)
      bad(name, str_cat("expected tensor '", e.name, "' to start at byte ", at, " (where '",
                        prev->name, "' ends), got ", e.begin, " (overlapping offsets)"));
    if (e.begin > at)
      bad(name, str_cat("expected tensor '", e.name, "' to start at byte ", at, ", got ", e.begin,
                        " (a hole in the data)"));
    at = e.end;
    prev = &e;
  }
  if (at != data_size)
    bad(name, str_cat("expected the tensors to cover the ", data_size, " bytes of data, got ", at,
                      " (unindexed bytes at the end)"));
}

// The header (the JSON text) checked against the data that follows it.
Layout parse_header(std::span<const uint8_t> text, uint64_t data_size, std::string_view name) {
  json j;
  try {
    j = json::parse(text.begin(), text.end());
  } catch (const json::exception& e) {
    bad(name, str_cat("expected a JSON header, got a parse error: ", e.what()));
  }
  if (!j.is_object()) bad(name, str_cat("expected a JSON object header, got a ", j.type_name()));
  Layout out;
  for (auto& [key, v] : j.items()) {
    if (key == kMetadataKey)
      out.metadata = parse_metadata(v, name);
    else
      out.entries.push_back(parse_entry(key, v, data_size, name));
  }
  std::sort(out.entries.begin(), out.entries.end(), [](const Entry& a, const Entry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  check_tiling(out.entries, data_size, name);
  return out;
}

uint64_t read_u64_le(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

// The 8-byte size prefix, checked against the bytes there are.
uint64_t header_size(std::span<const uint8_t> prefix, uint64_t total, std::string_view name) {
  if (total < 8)
    bad(name, str_cat("expected an 8-byte header size (truncated file), got ", total, " bytes"));
  uint64_t n = read_u64_le(prefix.data());
  if (n > total - 8)
    bad(name, str_cat("expected a header of ", n, " bytes (truncated file?), got ", total - 8,
                      " bytes after the size"));
  return n;
}

Tensor empty_for(const Entry& e) { return Tensor::empty(e.dtype, e.shape); }

void canonicalise_bool(Tensor& t) {
  if (t.dtype() != DType::boolean) return;
  auto* p = t.data_as<uint8_t>();
  for (size_t i = 0; i < t.nbytes(); ++i) p[i] = p[i] != 0;
}

// What is written: the header text and the contiguous tensors, in layout order.
struct Plan {
  std::string header;  // padded
  std::vector<std::pair<std::string, Tensor>> tensors;
};

Plan plan(const TensorMap& tensors, const std::map<std::string, std::string>& metadata) {
  Plan p;
  for (auto& [name, t] : tensors) {
    if (name == kMetadataKey)
      fail<ValueError>("safetensors", "expected tensor names other than \"__metadata__\", got it");
    if (!t.defined())
      fail<ValueError>("safetensors", "expected a tensor to write for '", name,
                       "', got an undefined one");
    if (!t.device().is_cpu())
      fail<ValueError>("safetensors", "expected a host tensor for '", name, "', got one on ",
                       t.device().str());
    p.tensors.emplace_back(name, t.contiguous());
  }
  // Python's order (dtype descending in the Rust enum, then name): byte-identical files,
  // and item sizes never grow along the data, so every tensor starts aligned.
  std::stable_sort(p.tensors.begin(), p.tensors.end(), [](const auto& a, const auto& b) {
    return layout_rank(a.second.dtype()) > layout_rank(b.second.dtype());
  });
  ordered_json j = ordered_json::object();
  if (!metadata.empty()) j[kMetadataKey] = metadata;
  uint64_t at = 0;
  for (auto& [name, t] : p.tensors) {
    ordered_json e = ordered_json::object();
    e["dtype"] = std::string(safetensors_dtype_name(t.dtype()));
    e["shape"] = t.shape();
    e["data_offsets"] = {at, at + t.nbytes()};
    j[name] = std::move(e);
    at += t.nbytes();
  }
  try {
    p.header = j.dump();
  } catch (const ordered_json::exception& e) {
    fail<ValueError>("safetensors", "expected UTF-8 tensor names and metadata, got: ", e.what());
  }
  p.header.append((8 - p.header.size() % 8) % 8, ' ');
  return p;
}

std::array<uint8_t, 8> u64_le(uint64_t v) {
  std::array<uint8_t, 8> b;
  for (int i = 0; i < 8; ++i) b[size_t(i)] = uint8_t(v >> (8 * i));
  return b;
}

}  // namespace

std::string_view safetensors_dtype_name(DType dt) {
  for (auto& d : kDTypeNames)
    if (d.dtype == dt) return d.name;
  fail<ValueError>("safetensors", "expected a dtype, got an invalid one");
}

SafetensorsFile read_safetensors(std::span<const uint8_t> bytes, std::string_view name) {
  uint64_t n = header_size(bytes, bytes.size(), name);
  uint64_t data_start = 8 + n;
  Layout layout = parse_header(bytes.subspan(8, n), bytes.size() - data_start, name);
  SafetensorsFile out{{}, std::move(layout.metadata)};
  for (const Entry& e : layout.entries) {
    Tensor t = empty_for(e);
    if (t.nbytes()) std::memcpy(t.data(), bytes.data() + data_start + e.begin, t.nbytes());
    canonicalise_bool(t);
    out.tensors.emplace(e.name, std::move(t));
  }
  return out;
}

SafetensorsFile load_safetensors(const std::string& path) {
  detail::BinaryReader in("safetensors", path);
  uint64_t total = uint64_t(in.size());
  std::array<uint8_t, 8> prefix{};
  in.read(prefix.data(), size_t(std::min<uint64_t>(total, 8)));
  uint64_t n = header_size(prefix, total, path);
  std::vector<uint8_t> header(n);
  in.read(header.data(), header.size());
  uint64_t data_start = 8 + n;
  Layout layout = parse_header(header, total - data_start, path);
  SafetensorsFile out{{}, std::move(layout.metadata)};
  for (const Entry& e : layout.entries) {
    Tensor t = empty_for(e);
    in.seek(data_start + e.begin);
    in.read(t.data(), t.nbytes());
    canonicalise_bool(t);
    out.tensors.emplace(e.name, std::move(t));
  }
  return out;
}

std::vector<uint8_t> write_safetensors_bytes(const TensorMap& tensors,
                                             const std::map<std::string, std::string>& metadata) {
  Plan p = plan(tensors, metadata);
  size_t total = 8 + p.header.size();
  for (auto& [_, t] : p.tensors) total += t.nbytes();
  std::vector<uint8_t> out;
  out.reserve(total);
  auto size = u64_le(p.header.size());
  out.insert(out.end(), size.begin(), size.end());
  out.insert(out.end(), p.header.begin(), p.header.end());
  for (auto& [_, t] : p.tensors) {
    auto* d = static_cast<const uint8_t*>(t.data());
    out.insert(out.end(), d, d + t.nbytes());
  }
  return out;
}

void save_safetensors(const std::string& path, const TensorMap& tensors,
                      const std::map<std::string, std::string>& metadata) {
  Plan p = plan(tensors, metadata);
  errno = 0;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) bad(path, str_cat("expected a writable file, got: ", sys_error()));
  auto write = [&](const void* d, size_t n) {
    if (n) out.write(static_cast<const char*>(d), std::streamsize(n));
  };
  auto size = u64_le(p.header.size());
  write(size.data(), size.size());
  write(p.header.data(), p.header.size());
  size_t written = 8 + p.header.size();
  for (auto& [_, t] : p.tensors) {
    write(t.data(), t.nbytes());
    written += t.nbytes();
  }
  out.flush();
  if (!out) bad(path, str_cat("expected to write ", written, " bytes, got a write error"));
}

}  // namespace rlx
