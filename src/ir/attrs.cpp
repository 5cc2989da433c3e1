#include "rlx/attrs.h"

#include <cstring>

#include "rlx/error.h"

namespace rlx {

std::string_view attr_kind_name(AttrKind k) {
  static constexpr std::string_view kNames[] = {"int",  "float",  "string", "bool",
                                                "ints", "floats", "dtype",  "tensor"};
  return kNames[static_cast<int>(k)];
}

Attrs& Attrs::set(std::string key, AttrValue v) {
  map_.insert_or_assign(std::move(key), std::move(v));
  return *this;
}

const AttrValue* Attrs::find(std::string_view key) const {
  auto it = map_.find(key);
  return it == map_.end() ? nullptr : &it->second;
}

const AttrValue& Attrs::need(std::string_view key, AttrKind kind) const {
  const AttrValue* v = find(key);
  if (!v) fail<ValueError>("attrs", "expected attribute '", key, "', got none");
  bool ok = v->kind() == kind || (kind == AttrKind::Float && v->kind() == AttrKind::Int) ||
            (kind == AttrKind::Floats && v->kind() == AttrKind::Ints);
  if (!ok)
    fail<TypeError>("attrs", "expected attribute '", key, "' of kind ", attr_kind_name(kind),
                    ", got ", attr_kind_name(v->kind()));
  return *v;
}

int64_t Attrs::get_int(std::string_view key) const {
  return *need(key, AttrKind::Int).get_if<int64_t>();
}
double Attrs::get_float(std::string_view key) const {
  const AttrValue& v = need(key, AttrKind::Float);
  if (auto* i = v.get_if<int64_t>()) return double(*i);
  return *v.get_if<double>();
}
bool Attrs::get_bool(std::string_view key) const {
  return *need(key, AttrKind::Bool).get_if<bool>();
}
const std::string& Attrs::get_string(std::string_view key) const {
  return *need(key, AttrKind::String).get_if<std::string>();
}
const IntList& Attrs::get_ints(std::string_view key) const {
  return *need(key, AttrKind::Ints).get_if<IntList>();
}
FloatList Attrs::get_floats(std::string_view key) const {
  const AttrValue& v = need(key, AttrKind::Floats);
  if (auto* i = v.get_if<IntList>()) return FloatList(i->begin(), i->end());
  return *v.get_if<FloatList>();
}
DType Attrs::get_dtype(std::string_view key) const {
  return *need(key, AttrKind::DType).get_if<DType>();
}
const Literal& Attrs::get_tensor(std::string_view key) const {
  return *need(key, AttrKind::Tensor).get_if<Literal>();
}

namespace {
struct Encoder {
  std::vector<uint8_t> out;
  void byte(uint8_t b) { out.push_back(b); }
  void u64(uint64_t v) {
    for (int i = 0; i < 8; ++i) out.push_back(uint8_t(v >> (8 * i)));
  }
  void f64(double d) {
    uint64_t v;
    std::memcpy(&v, &d, 8);
    u64(v);
  }
  void str(std::string_view s) {
    u64(s.size());
    out.insert(out.end(), s.begin(), s.end());
  }
  void value(const AttrValue& a) {
    byte(uint8_t(a.kind()));
    std::visit(
        [&](const auto& x) {
          using T = std::decay_t<decltype(x)>;
          if constexpr (std::is_same_v<T, int64_t>)
            u64(uint64_t(x));
          else if constexpr (std::is_same_v<T, double>)
            f64(x);
          else if constexpr (std::is_same_v<T, std::string>)
            str(x);
          else if constexpr (std::is_same_v<T, bool>)
            byte(x ? 1 : 0);
          else if constexpr (std::is_same_v<T, IntList>) {
            u64(x.size());
            for (int64_t v : x) u64(uint64_t(v));
          } else if constexpr (std::is_same_v<T, FloatList>) {
            u64(x.size());
            for (double v : x) f64(v);
          } else if constexpr (std::is_same_v<T, DType>)
            byte(uint8_t(x));
          else {  // Literal; element bytes are stored little-endian on our targets
            byte(uint8_t(x.dtype()));
            u64(x.shape().size());
            for (int64_t d : x.shape()) u64(uint64_t(d));
            if (is_string(x.dtype())) {  // the text, not the process's handles
              for (int64_t i = 0; i < x.numel(); ++i) str(x.string_at(i));
              return;
            }
            auto b = x.bytes();
            u64(b.size());
            out.insert(out.end(), b.begin(), b.end());
          }
        },
        a.variant());
  }
};
}  // namespace

std::vector<uint8_t> Attrs::encode() const {
  Encoder e;
  e.u64(map_.size());
  for (const auto& [k, v] : map_) {
    e.str(k);
    e.value(v);
  }
  return std::move(e.out);
}

uint64_t fnv1a64(const void* data, size_t n, uint64_t seed) {
  const auto* p = static_cast<const uint8_t*>(data);
  uint64_t h = seed;
  for (size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

uint64_t Attrs::hash() const {
  auto b = encode();
  return fnv1a64(b.data(), b.size());
}

}  // namespace rlx
