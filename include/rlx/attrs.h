// Node attributes: a typed map with a stable byte encoding and a hash.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <map>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "rlx/dtype.h"
#include "rlx/literal.h"

namespace rlx {

using IntList = std::vector<int64_t>;
using FloatList = std::vector<double>;

enum class AttrKind : uint8_t { Int, Float, String, Bool, Ints, Floats, DType, Tensor };
std::string_view attr_kind_name(AttrKind k);

// One attribute value. Constructors are implicit so attributes read naturally:
// {{"axis", 1}, {"perm", IntList{1, 0}}, {"mode", "reflect"}, {"alpha", 0.2}}.
class AttrValue {
 public:
  using Variant =
      std::variant<int64_t, double, std::string, bool, IntList, FloatList, DType, Literal>;

  AttrValue() : v_(int64_t{0}) {}
  AttrValue(int v) : v_(int64_t{v}) {}                             // NOLINT
  AttrValue(int64_t v) : v_(v) {}                                  // NOLINT
  AttrValue(double v) : v_(v) {}                                   // NOLINT
  AttrValue(float v) : v_(double{v}) {}                            // NOLINT
  AttrValue(bool v) : v_(v) {}                                     // NOLINT
  AttrValue(const char* v) : v_(std::string(v)) {}                 // NOLINT
  AttrValue(std::string v) : v_(std::move(v)) {}                   // NOLINT
  AttrValue(IntList v) : v_(std::move(v)) {}                       // NOLINT
  AttrValue(std::initializer_list<int64_t> v) : v_(IntList(v)) {}  // NOLINT
  AttrValue(FloatList v) : v_(std::move(v)) {}                     // NOLINT
  AttrValue(DType v) : v_(v) {}                                    // NOLINT
  AttrValue(Literal v) : v_(std::move(v)) {}                       // NOLINT

  AttrKind kind() const { return static_cast<AttrKind>(v_.index()); }
  const Variant& variant() const { return v_; }
  template <class T>
  const T* get_if() const {
    return std::get_if<T>(&v_);
  }
  bool operator==(const AttrValue& o) const { return v_ == o.v_; }

 private:
  Variant v_;
};

class Attrs {
 public:
  Attrs() = default;
  Attrs(std::initializer_list<std::pair<const std::string, AttrValue>> init) : map_(init) {}

  Attrs& set(std::string key, AttrValue v);
  bool has(std::string_view key) const { return map_.find(key) != map_.end(); }
  const AttrValue* find(std::string_view key) const;
  size_t size() const { return map_.size(); }
  bool empty() const { return map_.empty(); }
  auto begin() const { return map_.begin(); }
  auto end() const { return map_.end(); }

  // Typed getters: throw ValueError if absent, TypeError if of another kind.
  // get_float accepts an Int; get_floats accepts Ints.
  int64_t get_int(std::string_view key) const;
  double get_float(std::string_view key) const;
  bool get_bool(std::string_view key) const;
  const std::string& get_string(std::string_view key) const;
  const IntList& get_ints(std::string_view key) const;
  FloatList get_floats(std::string_view key) const;
  DType get_dtype(std::string_view key) const;
  const Literal& get_tensor(std::string_view key) const;

  // Stable encoding: keys in byte order, each as kind tag + length-prefixed key +
  // little-endian value. Equal maps give equal bytes on every platform we build for.
  std::vector<uint8_t> encode() const;
  uint64_t hash() const;  // FNV-1a 64 of encode()
  bool operator==(const Attrs& o) const { return map_ == o.map_; }

 private:
  const AttrValue& need(std::string_view key, AttrKind kind) const;
  std::map<std::string, AttrValue, std::less<>> map_;
};

uint64_t fnv1a64(const void* data, size_t n, uint64_t seed = 0xcbf29ce484222325ull);

}  // namespace rlx
