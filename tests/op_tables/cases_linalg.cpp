#include "op_tables/infer_harness.h"

namespace rlx::testing {

namespace {
constexpr auto V = Expect::value_error;
constexpr auto T = Expect::type_error;

Attrs dg(IntList lc, IntList rc, IntList lb = {}, IntList rb = {}) {
  return {{"lhs_contracting", lc}, {"rhs_contracting", rc}, {"lhs_batch", lb}, {"rhs_batch", rb}};
}
}  // namespace

std::vector<InferCase> linalg_cases() {
  return {
      // matmul
      ok("matmul", {"f32[2,3]", "f32[3,4]"}, {}, {"f32[2,4]"}),
      ok("matmul", {"f32[3]", "f32[3,4]"}, {}, {"f32[4]"}),
      ok("matmul", {"f32[2,3]", "f32[3]"}, {}, {"f32[2]"}),
      ok("matmul", {"f64[3]", "f64[3]"}, {}, {"f64[]"}),
      ok("matmul", {"f32[5,2,3]", "f32[3,4]"}, {}, {"f32[5,2,4]"}),
      ok("matmul", {"f32[5,1,2,3]", "f32[7,3,4]"}, {}, {"f32[5,7,2,4]"}),
      ok("matmul", {"f32[3]", "f32[5,3,4]"}, {}, {"f32[5,4]"}),
      ok("matmul", {"f32[5,2,3]", "f32[3]"}, {}, {"f32[5,2]"}),
      ok("matmul", {"bf16[b,s,64]", "bf16[64,128]"}, {}, {"bf16[b,s,128]"}),
      ok("matmul", {"f32[b,m,k]", "f32[b,k,n]"}, {}, {"f32[b,m,n]"}),
      ok("matmul", {"f32[2,?]", "f32[k,4]"}, {}, {"f32[2,4]"}),
      ok("matmul", {"f32[b,2,3]", "f32[c,3,4]"}, {}, {"f32[?,2,4]"}),
      ok("matmul", {"i32[0,3]", "i32[3,0]"}, {}, {"i32[0,0]"}),
      ok("matmul", {"f16[2,0]", "f16[0,4]"}, {}, {"f16[2,4]"}),
      ok("matmul", {"f32[1,1]", "f32[1,1]"}, {}, {"f32[1,1]"}),
      bad("matmul", {"f32[2,3]", "f32[4,5]"}, {}, V, "expected equal contraction dims"),
      bad("matmul", {"f32[3]", "f32[4]"}, {}, V, "got 3 and 4"),
      bad("matmul", {"f32[2,k]", "f32[j,4]"}, {}, V, "contraction dims"),
      bad("matmul", {"f32[2,2,3]", "f32[5,3,4]"}, {}, V, "broadcastable shapes"),
      bad("matmul", {"f32[]", "f32[3]"}, {}, V, "input 0 of rank >= 1"),
      bad("matmul", {"f32[3]", "f32[]"}, {}, V, "input 1 of rank >= 1"),
      bad("matmul", {"f32[2,3]", "f16[3,4]"}, {}, T, "same dtype"),
      bad("matmul", {"bool[2,3]", "bool[3,4]"}, {}, T, "numeric dtype"),
      bad("matmul", {"f32[2,3]"}, {}, V, "expected 2 inputs, got 1"),
      bad("matmul", {"f32[2,3]", "f32[3,4]"}, {{"transpose_a", true}}, V, "unknown"),

      // dot_general
      ok("dot_general", {"f32[2,3]", "f32[3,4]"}, dg({1}, {0}), {"f32[2,4]"}),
      ok("dot_general", {"f32[b,m,k]", "f32[b,k,n]"}, dg({2}, {1}, {0}, {0}), {"f32[b,m,n]"}),
      ok("dot_general", {"f32[2,3,5]", "f32[4,5,3]"}, dg({1, 2}, {2, 1}), {"f32[2,4]"}),
      ok("dot_general", {"f32[3,h,s,d]", "f32[h,t,d]"}, dg({-1}, {-1}, {1}, {0}), {"f32[h,3,s,t]"}),
      ok("dot_general", {"f32[2,3]", "f32[4]"}, dg({}, {}), {"f32[2,3,4]"}),
      ok("dot_general", {"i8[5]", "i8[5]"},
         {{"lhs_contracting", IntList{0}}, {"rhs_contracting", IntList{0}}}, {"i8[]"}),
      ok("dot_general", {"f32[b,0]", "f32[?,0,7]"}, dg({1}, {1}, {0}, {0}), {"f32[b,7]"}),
      bad("dot_general", {"f32[2,3]", "f32[4,5]"}, dg({1}, {0}), V,
          "expected equal contracting dims 1 and 0"),
      bad("dot_general", {"f32[2,3]", "f32[4,3]"}, dg({1}, {1}, {0}, {0}), V,
          "expected equal batch dims 0 and 0"),
      bad("dot_general", {"f32[2,3]", "f32[3,4]"}, dg({1}, {0, 1}), V,
          "lhs_contracting and rhs_contracting of equal length"),
      bad("dot_general", {"f32[2,3]", "f32[2,3]"}, dg({1}, {1}, {0}, {}), V,
          "lhs_batch and rhs_batch of equal length"),
      bad("dot_general", {"f32[2,3]", "f32[3,4]"}, dg({2}, {0}), V, "lhs_contracting in [-2, 2)"),
      bad("dot_general", {"f32[2,3]", "f32[3,4]"}, dg({1}, {-3}), V, "rhs_contracting in [-2, 2)"),
      bad("dot_general", {"f32[3,3]", "f32[3,3]"}, dg({1, -1}, {0, 1}), V,
          "distinct axes across lhs_batch and lhs_contracting"),
      bad("dot_general", {"f32[3,3]", "f32[3,3]"}, dg({0}, {1}, {0}, {0}), V,
          "distinct axes across lhs_batch"),
      bad("dot_general", {"f32[2,3]", "i32[3,4]"}, dg({1}, {0}), T, "same dtype"),
      bad("dot_general", {"bool[2,3]", "bool[3,4]"}, dg({1}, {0}), T, "numeric dtype"),
      bad("dot_general", {"f32[2,3]", "f32[3,4]"}, {{"lhs_contracting", IntList{1}}}, V,
          "'rhs_contracting' (required)"),
  };
}

}  // namespace rlx::testing
