// Dimensions (static or symbolic), shapes and tensor types.
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "rlx/dtype.h"

namespace rlx {

// A dimension: a static size >= 0, or a named symbol ("batch") bound at compile or
// run time. The symbol "?" is anonymous: a size nothing else is known to equal
// (what inference returns when an output size depends on an unknown input size).
class Dim {
 public:
  Dim() = default;
  Dim(int64_t size);                 // NOLINT: implicit, so shapes read {2, 3}; throws if size < 0
  static Dim sym(std::string name);  // throws if name is not an identifier or "?"
  static Dim unknown() { return sym("?"); }

  bool is_static() const { return symbol_.empty(); }
  bool is_symbolic() const { return !symbol_.empty(); }
  bool is_unknown() const { return symbol_ == "?"; }
  // The static size; throws ValueError when the dim is symbolic.
  int64_t value() const;
  const std::string& symbol() const { return symbol_; }
  bool is(int64_t n) const { return is_static() && size_ == n; }

  // Structural equality: same size, or same symbol name (two "?" compare equal here;
  // use known_equal for "provably the same size").
  bool operator==(const Dim& o) const { return size_ == o.size_ && symbol_ == o.symbol_; }
  bool known_equal(const Dim& o) const { return *this == o && !is_unknown(); }
  std::string str() const;

 private:
  int64_t size_ = 0;
  std::string symbol_;
};

using Shape = std::vector<Dim>;

std::string shape_str(const Shape& s);                // "[batch,64]"
std::string ints_str(const std::vector<int64_t>& v);  // "[2,-1]"
bool is_static(const Shape& s);
// Product of the dims, or nullopt if any is symbolic.
std::optional<int64_t> numel(const Shape& s);
// The static sizes; throws ValueError naming `where` when a dim is symbolic.
std::vector<int64_t> static_sizes(const Shape& s, std::string_view where = "shape");
Shape to_shape(const std::vector<int64_t>& sizes);
// Product of sizes; throws ValueError naming `where` on a negative size or int64 overflow.
int64_t checked_numel(const std::vector<int64_t>& sizes, std::string_view where);

struct TensorType {
  DType dtype = DType::f32;
  Shape shape;

  TensorType() = default;
  TensorType(DType d, Shape s) : dtype(d), shape(std::move(s)) {}

  int64_t rank() const { return static_cast<int64_t>(shape.size()); }
  bool is_static() const { return rlx::is_static(shape); }
  std::optional<int64_t> numel() const { return rlx::numel(shape); }
  std::string str() const;  // "f32[batch,64]"; a scalar is "f32[]"
  bool operator==(const TensorType& o) const = default;

  // Parses the form that str() writes; throws ValueError on malformed text.
  static TensorType parse(std::string_view text);
};

inline std::ostream& operator<<(std::ostream& os, const Dim& d) { return os << d.str(); }
inline std::ostream& operator<<(std::ostream& os, const TensorType& t) { return os << t.str(); }

// True for [A-Za-z_][A-Za-z0-9_.]*  (names of symbols, inputs, params, ops).
bool is_identifier(std::string_view s);

}  // namespace rlx
