#include "op_tables/infer_harness.h"

namespace rlx::testing {

namespace {

const auto V = Expect::value_error;
const auto T = Expect::type_error;
using Cases = std::vector<InferCase>;

void softmax_cases(Cases& c) {
  for (const char* op : {"softmax", "log_softmax"}) {
    c.push_back(ok(op, {"f32[2,3]"}, {}, {"f32[2,3]"}));
    c.push_back(ok(op, {"f16[batch,0]"}, {{"axis", 0}}, {"f16[batch,0]"}));
    c.push_back(ok(op, {"bf16[2,3,4]"}, {{"axis", -2}}, {"bf16[2,3,4]"}));
    c.push_back(ok(op, {"f64[1]"}, {}, {"f64[1]"}));
    c.push_back(bad(op, {"i32[2]"}, {}, T, "float dtype"));
    c.push_back(bad(op, {"f32[2,3]"}, {{"axis", 2}}, V, "axis in [-2, 2), got 2"));
    c.push_back(bad(op, {"f32[]"}, {}, V, "axis in [0, 0)"));
    c.push_back(bad(op, {"f32[2]"}, {{"dim", 0}}, V, "unknown 'dim'"));
    c.push_back(bad(op, {"f32[2]", "f32[2]"}, {}, V, "expected 1 inputs, got 2"));
  }
}

void norm_cases(Cases& c) {
  // layer_norm / rms_norm: scale and bias have x.shape[axis:].
  c.push_back(ok("layer_norm", {"f32[2,3,4]"}, {}, {"f32[2,3,4]"}));
  c.push_back(ok("layer_norm_grad", {"f32[2,3,4]", "f32[2,3,4]", "f32[4]"}, {},
                 {"f32[2,3,4]", "f32[4]", "f32[4]"}));
  c.push_back(ok("layer_norm_grad", {"bf16[b,s,8]", "bf16[b,s,?]"},
                 {{"axis", 1}, {"center", false}}, {"bf16[b,s,8]", "bf16[s,8]", "bf16[s,8]"}));
  c.push_back(bad("layer_norm_grad", {"f32[2,4]", "f32[2,5]"}, {}, V, "got 4 and 5"));
  c.push_back(bad("layer_norm_grad", {"f32[2,4]", "f32[2,4]", "f32[3]"}, {}, V, "scale"));
  c.push_back(bad("layer_norm_grad", {"f32[2,4]", "f16[2,4]"}, {}, T, "same dtype"));
  c.push_back(ok("layer_norm", {"f32[2,3,4]", "f32[4]", "f32[4]"}, {}, {"f32[2,3,4]"}));
  c.push_back(ok("layer_norm", {"f32[2,3,4]", "f32[3,4]"}, {{"axis", 1}}, {"f32[2,3,4]"}));
  c.push_back(ok("layer_norm", {"f16[2,3,4]", "f16[3,4]", "f16[3,4]"},
                 {{"axis", -2}, {"epsilon", 1e-3}}, {"f16[2,3,4]"}));
  c.push_back(ok("layer_norm", {"f32[batch,?]", "f32[8]"}, {}, {"f32[batch,8]"}));
  c.push_back(ok("layer_norm", {"f32[0,d]", "f32[d]", "f32[?]"}, {}, {"f32[0,d]"}));
  c.push_back(bad("layer_norm", {"i32[2,4]"}, {}, T, "float dtype"));
  c.push_back(bad("layer_norm", {"f32[2,4]", "f16[4]"}, {}, T, "same dtype"));
  c.push_back(bad("layer_norm", {"f32[2,4]", "f32[3]"}, {}, V, "got 4 and 3"));
  c.push_back(bad("layer_norm", {"f32[2,3,4]", "f32[4]"}, {{"axis", 1}}, V, "of shape [3,4]"));
  c.push_back(bad("layer_norm", {"f32[2,d]", "f32[e]"}, {}, V, "got d and e"));
  c.push_back(bad("layer_norm", {"f32[2,4]"}, {{"epsilon", -1.0}}, V, "'epsilon' >= 0"));
  c.push_back(bad("layer_norm", {"f32[2,4]"}, {{"axis", 2}}, V, "axis in [-2, 2)"));
  c.push_back(bad("layer_norm", {"f32[4]", "f32[4]", "f32[4]", "f32[4]"}, {}, V, "1 to 3"));

  c.push_back(ok("rms_norm", {"f32[2,8]"}, {}, {"f32[2,8]"}));
  c.push_back(ok("rms_norm", {"bf16[b,s,64]", "bf16[64]"}, {{"epsilon", 0}}, {"bf16[b,s,64]"}));
  c.push_back(ok("rms_norm", {"f32[b,1,?]", "f32[1,16]"}, {{"axis", 1}}, {"f32[b,1,16]"}));
  c.push_back(bad("rms_norm", {"f32[2,8]", "f32[8]", "f32[8]"}, {}, V, "1 to 2 inputs"));
  c.push_back(bad("rms_norm", {"f32[2,8]", "f32[2,8]"}, {}, V, "of shape [8]"));
  c.push_back(bad("rms_norm", {"i64[2,8]"}, {}, T, "float dtype"));
  c.push_back(bad("rms_norm", {"f32[2,8]"}, {{"epsilon", "small"}}, T, "'epsilon' of kind"));

  // group_norm / batch_norm: per-channel vectors [C] of x [N, C, ...].
  c.push_back(ok("group_norm", {"f32[2,6,4,4]", "f32[6]", "f32[6]"}, {{"num_groups", 3}},
                 {"f32[2,6,4,4]"}));
  c.push_back(ok("group_norm", {"f32[batch,?,10]", "f32[8]", "f32[8]"}, {{"num_groups", 8}},
                 {"f32[batch,8,10]"}));
  c.push_back(
      ok("group_norm", {"f16[0,4]", "f16[4]", "f16[4]"}, {{"num_groups", 1}}, {"f16[0,4]"}));
  c.push_back(bad("group_norm", {"f32[2,6,4]", "f32[6]", "f32[6]"}, {}, V, "(required)"));
  c.push_back(bad("group_norm", {"f32[2,6,4]", "f32[6]", "f32[6]"}, {{"num_groups", 4}}, V,
                  "divisible by num_groups 4"));
  c.push_back(bad("group_norm", {"f32[2,6,4]", "f32[6]", "f32[6]"}, {{"num_groups", 0}}, V,
                  "num_groups >= 1"));
  c.push_back(
      bad("group_norm", {"f32[6]", "f32[6]", "f32[6]"}, {{"num_groups", 1}}, V, "rank >= 2"));
  c.push_back(
      bad("group_norm", {"f32[2,6,4]", "f32[5]", "f32[6]"}, {{"num_groups", 1}}, V, "got 6 and 5"));
  c.push_back(
      bad("group_norm", {"i32[2,6,4]", "i32[6]", "i32[6]"}, {{"num_groups", 1}}, T, "float dtype"));
  c.push_back(
      bad("group_norm", {"f32[2,6,4]", "f32[6]"}, {{"num_groups", 1}}, V, "expected 3 inputs"));

  const std::vector<std::string> v3(4, "f32[3]");
  auto bn = [&](std::string x, std::vector<std::string> rest) {
    rest.insert(rest.begin(), std::move(x));
    return rest;
  };
  c.push_back(ok("batch_norm", bn("f32[8,3,32,32]", v3), {}, {"f32[8,3,32,32]"}));
  c.push_back(ok("batch_norm", bn("f32[?,c]", {"f32[c]", "f32[c]", "f32[?]", "f32[c]"}),
                 {{"epsilon", 1e-3}}, {"f32[?,c]"}));
  c.push_back(ok("batch_norm", bn("f64[0,1,5]", std::vector<std::string>(4, "f64[1]")), {},
                 {"f64[0,1,5]"}));
  c.push_back(bad("batch_norm", bn("f32[8,3]", {"f32[3]", "f32[3]", "f32[3]", "f32[4]"}), {}, V,
                  "got 3 and 4"));
  c.push_back(bad("batch_norm", bn("f32[8,3]", {"f32[3]", "f32[3]", "f16[3]", "f32[3]"}), {}, T,
                  "same dtype"));
  c.push_back(bad("batch_norm", bn("f32[3]", v3), {}, V, "rank >= 2"));
  c.push_back(bad("batch_norm", bn("f32[8,3]", {"f32[3]", "f32[3]", "f32[3]"}), {}, V,
                  "expected 5 inputs"));
  c.push_back(bad("batch_norm", bn("f32[8,3]", {"f32[3]", "f32[3]", "f32[3]", "f32[1,3]"}), {}, V,
                  "of shape [3]"));
}

void conv_cases(Cases& c) {
  const std::string x = "f32[1,3,32,32]", w = "f32[16,3,3,3]";
  c.push_back(ok("conv", {x, w}, {}, {"f32[1,16,30,30]"}));
  c.push_back(ok("conv", {x, w, "f32[16]"}, {{"pads", IntList{1, 1, 1, 1}}}, {"f32[1,16,32,32]"}));
  c.push_back(ok("conv", {x, w}, {{"strides", IntList{2, 2}}, {"pads", IntList{1, 1, 1, 1}}},
                 {"f32[1,16,16,16]"}));
  c.push_back(ok("conv", {x, w}, {{"dilations", IntList{2, 3}}}, {"f32[1,16,28,26]"}));
  c.push_back(ok("conv", {"f32[1,3,5,5]", "f32[4,3,3,3]"}, {{"pads", IntList{0, 1, 2, 3}}},
                 {"f32[1,4,5,7]"}));
  c.push_back(ok("conv", {"f16[2,4,10]", "f16[8,4,3]", "f16[8]"}, {}, {"f16[2,8,8]"}));
  c.push_back(ok("conv", {"f32[1,2,8,8,8]", "f32[4,2,3,3,3]"}, {{"strides", IntList{2, 2, 2}}},
                 {"f32[1,4,3,3,3]"}));
  c.push_back(ok("conv", {"f32[1,8,10,10]", "f32[16,2,3,3]"}, {{"groups", 4}}, {"f32[1,16,8,8]"}));
  c.push_back(ok("conv", {"f32[1,8,10,10]", "f32[8,1,3,3]"}, {{"groups", 8}}, {"f32[1,8,8,8]"}));
  c.push_back(ok("conv", {"f32[1,3,31,31]", "f32[8,3,3,3]"},
                 {{"auto_pad", "same_upper"}, {"strides", IntList{2, 2}}}, {"f32[1,8,16,16]"}));
  c.push_back(
      ok("conv", {"f32[n,3,h,w]", "f32[8,3,5,5]"}, {{"auto_pad", "same_lower"}}, {"f32[n,8,h,w]"}));
  c.push_back(ok("conv", {"f32[1,3,7,7]", "f32[8,3,3,3]"},
                 {{"auto_pad", "valid"}, {"strides", IntList{2, 2}}}, {"f32[1,8,3,3]"}));
  c.push_back(
      ok("conv", {"f32[batch,3,h,w]", w}, {{"strides", IntList{2, 2}}}, {"f32[batch,16,?,?]"}));
  c.push_back(ok("conv", {"f32[n,3,t]", "f32[8,3,3]"}, {{"pads", IntList{1, 1}}}, {"f32[n,8,t]"}));
  c.push_back(ok("conv", {"f32[n,c,t]", "f32[m,c,3]", "f32[m]"}, {}, {"f32[n,m,?]"}));
  c.push_back(ok("conv", {x, "f32[16,3,k,k]"}, {}, {"f32[1,16,?,?]"}));
  c.push_back(ok("conv", {"f32[0,3,5,5]", w}, {}, {"f32[0,16,3,3]"}));
  c.push_back(ok("conv", {"f32[1,3,1,1]", "f32[4,3,1,1]"}, {}, {"f32[1,4,1,1]"}));
  c.push_back(bad("conv", {"i32[1,3,8,8]", "i32[4,3,3,3]"}, {}, T, "float dtype"));
  c.push_back(bad("conv", {x, "f16[16,3,3,3]"}, {}, T, "same dtype"));
  c.push_back(bad("conv", {x, w, "f32[15]"}, {}, V, "output channels of w and bias"));
  c.push_back(bad("conv", {x, w, "f32[1,16]"}, {}, V, "input 2 of rank 1"));
  c.push_back(bad("conv", {"f32[1,4,8,8]", w}, {}, V, "channels x.shape[1]"));
  c.push_back(
      bad("conv", {"f32[1,6,8,8]", "f32[16,2,3,3]"}, {{"groups", 3}}, V, "divisible by groups 3"));
  c.push_back(bad("conv", {x, w}, {{"groups", 0}}, V, "groups >= 1"));
  c.push_back(bad("conv", {x, w}, {{"strides", IntList{0, 1}}}, V, "'strides' entries >= 1"));
  c.push_back(bad("conv", {x, w}, {{"strides", IntList{1}}}, V, "'strides' of length 2"));
  c.push_back(bad("conv", {x, w}, {{"dilations", IntList{1, 0}}}, V, "'dilations' entries"));
  c.push_back(bad("conv", {x, w}, {{"pads", IntList{1, 1}}}, V, "'pads' of length 4"));
  c.push_back(bad("conv", {x, w}, {{"pads", IntList{1, 1, -1, 1}}}, V, "'pads' entries >= 0"));
  c.push_back(bad("conv", {x, w}, {{"auto_pad", "same_upper"}, {"pads", IntList{1, 1, 1, 1}}}, V,
                  "no pads with auto_pad"));
  c.push_back(bad("conv", {x, w}, {{"auto_pad", "same"}}, V, "one of explicit|same_upper"));
  c.push_back(bad("conv", {"f32[1,3,2,2]", w}, {}, V, "output size >= 1 along spatial dim 0"));
  c.push_back(bad("conv", {"f32[1,3,0,4]", w}, {}, V, "non-empty spatial dims"));
  c.push_back(bad("conv", {x, "f32[16,3,0,3]"}, {}, V, "kernel sizes >= 1"));
  c.push_back(bad("conv", {"f32[1,3]", "f32[4,3]"}, {}, V, "rank 3 to 5"));
  c.push_back(bad("conv", {"f32[1,3,2,2,2,2]", "f32[4,3,1,1,1,1]"}, {}, V, "rank 3 to 5"));
  c.push_back(bad("conv", {x, "f32[16,3,3]"}, {}, V, "input 1 of rank 4"));
  c.push_back(bad("conv", {x}, {}, V, "2 to 3 inputs"));

  // conv_transpose: w [C, M/groups, K...].
  c.push_back(ok("conv_transpose", {"f32[1,16,8,8]", "f32[16,8,3,3]"}, {}, {"f32[1,8,10,10]"}));
  c.push_back(ok("conv_transpose", {"f32[1,16,8,8]", "f32[16,8,3,3]", "f32[8]"},
                 {{"strides", IntList{2, 2}},
                  {"pads", IntList{1, 1, 1, 1}},
                  {"output_padding", IntList{1, 1}}},
                 {"f32[1,8,16,16]"}));
  c.push_back(ok("conv_transpose", {"f32[1,4,5]", "f32[4,3,3]", "f32[6]"}, {{"groups", 2}},
                 {"f32[1,6,7]"}));
  c.push_back(ok("conv_transpose", {"f32[2,4,h,7]", "f32[4,2,3,3]"},
                 {{"auto_pad", "same_upper"}, {"strides", IntList{2, 2}}}, {"f32[2,2,?,14]"}));
  c.push_back(ok("conv_transpose", {"f32[n,4,t]", "f32[4,2,3]"}, {{"pads", IntList{1, 1}}},
                 {"f32[n,2,t]"}));
  c.push_back(ok("conv_transpose", {"f32[n,4,t]", "f32[4,2,3]"}, {{"strides", IntList{2}}},
                 {"f32[n,2,?]"}));
  c.push_back(ok("conv_transpose", {"f64[1,2,2,2,2]", "f64[2,3,2,2,2]"},
                 {{"strides", IntList{2, 2, 2}}, {"auto_pad", "valid"}}, {"f64[1,3,4,4,4]"}));
  c.push_back(ok("conv_transpose", {"f32[0,4,1]", "f32[4,1,1]"}, {{"dilations", IntList{3}}},
                 {"f32[0,1,1]"}));
  c.push_back(bad("conv_transpose", {"f32[1,4,5]", "f32[3,2,3]"}, {}, V,
                  "channels x.shape[1] and w.shape[0]"));
  c.push_back(bad("conv_transpose", {"f32[1,3,5]", "f32[3,2,3]"}, {{"groups", 2}}, V,
                  "divisible by groups 2"));
  c.push_back(bad("conv_transpose", {"f32[1,4,5]", "f32[4,2,3]"},
                  {{"strides", IntList{2}}, {"output_padding", IntList{2}}}, V,
                  "output_padding smaller"));
  c.push_back(bad("conv_transpose", {"f32[1,4,5]", "f32[4,2,3]"},
                  {{"output_padding", IntList{0, 0}}}, V, "'output_padding' of length 1"));
  c.push_back(
      bad("conv_transpose", {"f32[1,4,1]", "f32[4,2,1]"}, {{"pads", IntList{1, 1}}}, V, "got -1"));
  c.push_back(bad("conv_transpose", {"f32[1,4,5]", "f32[4,2,3]", "f32[3]"}, {}, V,
                  "output channels of w and bias"));
  c.push_back(bad("conv_transpose", {"i8[1,4,5]", "i8[4,2,3]"}, {}, T, "float dtype"));
  c.push_back(
      bad("conv_transpose", {"f32[1,4,5]", "f32[4,2,3]"}, {{"auto_pad", "full"}}, V, "'auto_pad'"));
}

void pool_cases(Cases& c) {
  for (const char* op : {"max_pool", "avg_pool"}) {
    c.push_back(ok(op, {"f32[1,3,32,32]"},
                   {{"kernel_shape", IntList{2, 2}}, {"strides", IntList{2, 2}}},
                   {"f32[1,3,16,16]"}));
    c.push_back(ok(op, {"f32[1,3,5,5]"},
                   {{"kernel_shape", IntList{3, 3}},
                    {"strides", IntList{2, 2}},
                    {"pads", IntList{1, 1, 1, 1}}},
                   {"f32[1,3,3,3]"}));
    c.push_back(ok(op, {"f32[1,1,5]"}, {{"kernel_shape", IntList{2}}, {"strides", IntList{2}}},
                   {"f32[1,1,2]"}));
    c.push_back(ok(op, {"f32[1,1,5]"},
                   {{"kernel_shape", IntList{2}}, {"strides", IntList{2}}, {"ceil_mode", true}},
                   {"f32[1,1,3]"}));
    // Ceil mode drops a last window that would start in the right padding.
    c.push_back(ok(op, {"f32[1,1,3]"},
                   {{"kernel_shape", IntList{2}},
                    {"strides", IntList{2}},
                    {"pads", IntList{1, 1}},
                    {"ceil_mode", true}},
                   {"f32[1,1,2]"}));
    c.push_back(ok(op, {"f32[1,1,6]"},
                   {{"kernel_shape", IntList{3}},
                    {"strides", IntList{2}},
                    {"pads", IntList{1, 1}},
                    {"ceil_mode", true}},
                   {"f32[1,1,4]"}));
    c.push_back(ok(op, {"f16[n,c,h,w]"},
                   {{"kernel_shape", IntList{3, 3}}, {"pads", IntList{1, 1, 1, 1}}},
                   {"f16[n,c,h,w]"}));
    c.push_back(ok(op, {"f16[n,c,h,w]"},
                   {{"kernel_shape", IntList{2, 2}}, {"strides", IntList{2, 2}}},
                   {"f16[n,c,?,?]"}));
    c.push_back(
        ok(op, {"f32[2,3,7]"},
           {{"kernel_shape", IntList{3}}, {"strides", IntList{2}}, {"auto_pad", "same_upper"}},
           {"f32[2,3,4]"}));
    c.push_back(ok(op, {"f32[2,3,7]"}, {{"kernel_shape", IntList{3}}, {"dilations", IntList{2}}},
                   {"f32[2,3,3]"}));
    c.push_back(ok(op, {"f32[0,2,4,4,4]"},
                   {{"kernel_shape", IntList{2, 2, 2}}, {"auto_pad", "valid"}},
                   {"f32[0,2,3,3,3]"}));
    c.push_back(ok(op, {"f32[1,2,1,1]"}, {{"kernel_shape", IntList{1, 1}}}, {"f32[1,2,1,1]"}));
    c.push_back(bad(op, {"f32[1,3,8,8]"}, {}, V, "'kernel_shape' (required)"));
    c.push_back(bad(op, {"f32[1,3,8,8]"}, {{"kernel_shape", IntList{}}}, V, "non-empty"));
    c.push_back(
        bad(op, {"f32[1,3,8,8]"}, {{"kernel_shape", IntList{2}}}, V, "'kernel_shape' of length 2"));
    c.push_back(bad(op, {"f32[1,3,8,8]"}, {{"kernel_shape", IntList{2, 0}}}, V,
                    "'kernel_shape' entries >= 1"));
    c.push_back(bad(op, {"i32[1,3,8,8]"}, {{"kernel_shape", IntList{2, 2}}}, T, "float"));
    c.push_back(
        bad(op, {"f32[1,3,2,8]"}, {{"kernel_shape", IntList{3, 3}}}, V, "output size >= 1"));
    c.push_back(bad(op, {"f32[3,8]"}, {{"kernel_shape", IntList{2}}}, V, "rank 3 to 5"));
    c.push_back(bad(op, {"f32[1,3,8]"},
                    {{"kernel_shape", IntList{2}}, {"auto_pad", "valid"}, {"pads", IntList{1, 1}}},
                    V, "no pads"));
  }
  c.push_back(
      ok("avg_pool", {"f32[1,3,8]"},
         {{"kernel_shape", IntList{3}}, {"pads", IntList{1, 1}}, {"count_include_pad", true}},
         {"f32[1,3,8]"}));
  c.push_back(bad("max_pool", {"f32[1,3,8]"},
                  {{"kernel_shape", IntList{3}}, {"count_include_pad", true}}, V,
                  "unknown 'count_include_pad'"));

  for (const char* op : {"global_max_pool", "global_avg_pool"}) {
    c.push_back(ok(op, {"f32[2,3,7,7]"}, {}, {"f32[2,3,1,1]"}));
    c.push_back(ok(op, {"bf16[n,c,t]"}, {}, {"bf16[n,c,1]"}));
    c.push_back(ok(op, {"f32[0,3,2,3,4,5]"}, {}, {"f32[0,3,1,1,1,1]"}));
    c.push_back(bad(op, {"f32[2,3]"}, {}, V, "rank >= 3"));
    c.push_back(bad(op, {"i32[2,3,4]"}, {}, T, "float dtype"));
    c.push_back(bad(op, {"f32[2,3,0]"}, {}, V, "non-empty spatial"));
    c.push_back(bad(op, {"f32[2,3,4]"}, {{"keepdims", true}}, V, "unknown 'keepdims'"));
  }
}

void resize_cases(Cases& c) {
  const std::string x = "f32[1,3,32,32]";
  c.push_back(ok("resize", {x}, {{"sizes", IntList{1, 3, 64, 48}}}, {"f32[1,3,64,48]"}));
  c.push_back(ok("resize", {x}, {{"scales", FloatList{1, 1, 2, 2}}}, {"f32[1,3,64,64]"}));
  c.push_back(ok("resize", {x}, {{"scales", IntList{1, 1, 2, 3}}}, {"f32[1,3,64,96]"}));
  c.push_back(ok("resize", {"f32[1,3,33,33]"}, {{"scales", FloatList{1, 1, 0.5, 0.5}}},
                 {"f32[1,3,16,16]"}));
  c.push_back(
      ok("resize", {"f32[n,3,h,w]"}, {{"scales", FloatList{1, 1, 2, 2}}}, {"f32[n,3,?,?]"}));
  c.push_back(ok("resize", {"f32[n,3,h,w]"}, {{"sizes", IntList{2, 3, 8, 8}}}, {"f32[2,3,8,8]"}));
  c.push_back(ok("resize", {"u8[4,4,3]"}, {{"sizes", IntList{8, 8, 3}}, {"nearest_mode", "floor"}},
                 {"u8[8,8,3]"}));
  c.push_back(ok("resize", {"f16[2,5]"},
                 {{"scales", FloatList{1, 1.5}},
                  {"mode", "linear"},
                  {"coordinate_transformation", "align_corners"}},
                 {"f16[2,7]"}));
  c.push_back(ok("resize", {"f32[0,3,4]"}, {{"scales", FloatList{1, 1, 2}}}, {"f32[0,3,8]"}));
  c.push_back(bad("resize", {x}, {}, V, "exactly one of sizes or scales"));
  c.push_back(bad("resize", {x},
                  {{"sizes", IntList{1, 3, 8, 8}}, {"scales", FloatList{1, 1, 2, 2}}}, V,
                  "exactly one"));
  c.push_back(bad("resize", {x}, {{"sizes", IntList{8, 8}}}, V, "'sizes' of length 4"));
  c.push_back(bad("resize", {x}, {{"scales", FloatList{2}}}, V, "'scales' of length 4"));
  c.push_back(bad("resize", {x}, {{"sizes", IntList{1, 3, -8, 8}}}, V, "sizes >= 0"));
  c.push_back(bad("resize", {x}, {{"scales", FloatList{1, 1, 0, 2}}}, V, "scales > 0"));
  c.push_back(bad("resize", {"i32[4,4]"}, {{"sizes", IntList{8, 8}}, {"mode", "linear"}}, T,
                  "float dtype"));
  c.push_back(bad("resize", {"bool[4,4]"}, {{"sizes", IntList{8, 8}}}, T, "numeric dtype"));
  c.push_back(bad("resize", {x}, {{"scales", FloatList{1, 1, 2, 2}}, {"mode", "cubic"}}, V,
                  "one of nearest|linear"));
  c.push_back(bad("resize", {"f32[0,2]"}, {{"sizes", IntList{3, 2}}}, V, "empty input dim"));
}

void attention_cases(Cases& c) {
  const std::string q = "f32[2,8,16,64]";
  c.push_back(ok("attention", {q, q, q}, {}, {q}));
  c.push_back(ok("attention", {"f32[2,4,10,32]", "f32[2,4,12,32]", "f32[2,4,12,16]"}, {},
                 {"f32[2,4,10,16]"}));
  c.push_back(ok("attention", {q, "f32[2,1,16,64]", "f32[2,1,16,64]"}, {}, {q}));
  c.push_back(ok("attention", {"f32[8,16,64]", q, q}, {}, {q}));
  c.push_back(
      ok("attention", {"f16[5,8]", "f16[7,8]", "f16[7,3]"}, {{"scale", 0.125}}, {"f16[5,3]"}));
  c.push_back(ok("attention", {"f32[b,h,s,64]", "f32[b,h,t,64]", "f32[b,h,t,64]"},
                 {{"mask", "causal"}}, {"f32[b,h,s,64]"}));
  c.push_back(ok("attention", {q, q, q, "f32[1,1,16,16]"}, {}, {q}));
  c.push_back(
      ok("attention", {q, q, q, "f32[16,1]"}, {{"mask", "sliding_window"}, {"window", 4}}, {q}));
  c.push_back(ok("attention", {"f32[b,s,64]", "f32[b,t,64]", "f32[b,t,64]", "f32[b,1,t]"}, {},
                 {"f32[b,s,64]"}));
  c.push_back(ok("attention", {"f32[1,0,8]", "f32[1,1,8]", "f32[1,1,8]"}, {}, {"f32[1,0,8]"}));
  c.push_back(bad("attention", {q, "f32[2,8,16,32]", q}, {}, V, "head dims of q and k"));
  c.push_back(bad("attention", {q, "f32[2,8,12,64]", q}, {}, V, "key lengths of k and v"));
  c.push_back(
      bad("attention", {q, "f32[3,8,16,64]", "f32[3,8,16,64]"}, {}, V, "broadcastable shapes"));
  c.push_back(bad("attention", {"f32[64]", q, q}, {}, V, "input 0 of rank >= 2"));
  c.push_back(bad("attention", {"i32[4,4]", "i32[4,4]", "i32[4,4]"}, {}, T, "float dtype"));
  c.push_back(bad("attention", {q, q, "f16[2,8,16,64]"}, {}, T, "same dtype"));
  // attention_grad: the gradients in the broadcast batch shape.
  c.push_back(ok("attention_grad", {q, q, q, q}, {{"mask", "causal"}}, {q, q, q}));
  c.push_back(ok("attention_grad",
                 {"f32[8,10,32]", "f32[2,1,12,32]", "f32[12,16]", "f32[2,8,10,16]"}, {},
                 {"f32[2,8,10,32]", "f32[2,8,12,32]", "f32[2,8,12,16]"}));
  c.push_back(ok("attention_grad", {"bf16[b,s,64]", "bf16[b,t,64]", "bf16[b,t,64]", "bf16[b,s,64]"},
                 {}, {"bf16[b,s,64]", "bf16[b,t,64]", "bf16[b,t,64]"}));
  c.push_back(
      bad("attention_grad", {q, q, q, "f32[2,8,16,32]"}, {}, V, "dy of attention's output"));
  c.push_back(bad("attention_grad", {q, q, q, "f16[2,8,16,64]"}, {}, T, "same dtype"));
  c.push_back(bad("attention_grad", {q, q, q}, {}, V, "expected 4 to 6 inputs"));
  // attention_lse: the output and f32 statistics [..., H, Sq] in either layout; attention_grad
  // reading them.
  c.push_back(ok("attention_lse", {q, q, q}, {{"mask", "causal"}}, {q, "f32[2,8,16]"}));
  c.push_back(ok("attention_lse", {"bf16[b,s,h,64]", "bf16[b,t,h,64]", "bf16[b,t,h,64]"},
                 {{"layout", "bshd"}}, {"bf16[b,s,h,64]", "f32[b,h,s]"}));
  c.push_back(bad("attention_lse", {q, q, q, "f32[1,1,16,16]"}, {}, V, "expected 3 inputs"));
  c.push_back(ok("attention_grad", {q, q, q, q, q, "f32[2,8,16]"}, {}, {q, q, q}));
  c.push_back(ok("attention_grad",
                 {"bf16[b,s,h,64]", "bf16[b,t,h,64]", "bf16[b,t,h,64]", "bf16[b,s,h,64]",
                  "bf16[b,s,h,64]", "f32[b,h,s]"},
                 {{"layout", "bshd"}}, {"bf16[b,s,h,64]", "bf16[b,t,h,64]", "bf16[b,t,h,64]"}));
  c.push_back(bad("attention_grad", {q, q, q, q, q, "f32[2,16,8]"}, {}, V,
                  "lse of attention_lse's type f32[2,8,16]"));
  c.push_back(bad("attention_grad", {q, q, q, q, q, "f16[2,8,16]"}, {}, T, "lse of attention_lse"));
  c.push_back(bad("attention_grad", {q, q, q, q, "f32[2,8,16,32]", "f32[2,8,16]"}, {}, V,
                  "y of attention's output type"));
  c.push_back(bad("attention_grad", {q, q, q, q, q}, {}, V, "expected 4 inputs, or 6"));
  c.push_back(
      bad("attention", {q, q, q, "f32[16,15]"}, {}, V, "input 3 broadcastable to [2,8,16,16]"));
  c.push_back(bad("attention", {q, q, q, "f32[2,2,8,16,16]"}, {}, V, "broadcastable to"));
  c.push_back(bad("attention", {q, q, q}, {{"mask", "sliding_window"}}, V, "window >= 1"));
  c.push_back(bad("attention", {q, q, q}, {{"window", 4}}, V, "window 0 for mask 'none'"));
  c.push_back(bad("attention", {q, q, q}, {{"scale", -1.0}}, V, "'scale' >= 0"));
  c.push_back(bad("attention", {q, q, q}, {{"mask", "full"}}, V, "one of none|causal"));
  c.push_back(bad("attention", {q, q}, {}, V, "3 to 4 inputs"));
}

void misc_cases(Cases& c) {
  c.push_back(ok("embedding", {"f32[1000,64]", "i64[2,16]"}, {}, {"f32[2,16,64]"}));
  c.push_back(ok("embedding", {"f32[1000,64]", "i32[]"}, {}, {"f32[64]"}));
  c.push_back(ok("embedding", {"f16[vocab,d]", "i32[batch,seq]"}, {}, {"f16[batch,seq,d]"}));
  c.push_back(ok("embedding", {"i8[10,4]", "u8[3]"}, {}, {"i8[3,4]"}));
  c.push_back(ok("embedding", {"bool[10,0]", "i64[0]"}, {}, {"bool[0,0]"}));
  c.push_back(bad("embedding", {"f32[10,4]", "f32[3]"}, {}, T, "integer dtype"));
  c.push_back(bad("embedding", {"f32[10]", "i64[3]"}, {}, V, "input 0 of rank 2"));
  c.push_back(bad("embedding", {"f32[10,4]"}, {}, V, "expected 2 inputs"));
  c.push_back(bad("embedding", {"f32[10,4]", "i64[3]"}, {{"padding_idx", 0}}, V, "unknown"));

  c.push_back(ok("dropout", {"f32[2,3]"}, {}, {"f32[2,3]"}));
  c.push_back(ok("dropout", {"f16[batch,128]"}, {{"rate", 0.1}, {"training", true}, {"seed", 42}},
                 {"f16[batch,128]"}));
  c.push_back(ok("dropout", {"f32[]"}, {{"rate", 0}}, {"f32[]"}));
  c.push_back(ok("dropout", {"bf16[0,4]"}, {{"training", true}}, {"bf16[0,4]"}));
  c.push_back(bad("dropout", {"f32[2]"}, {{"rate", 1.0}}, V, "rate in [0, 1), got 1"));
  c.push_back(bad("dropout", {"f32[2]"}, {{"rate", -0.1}}, V, "rate in [0, 1)"));
  c.push_back(bad("dropout", {"i32[2]"}, {}, T, "float dtype"));
  c.push_back(bad("dropout", {"f32[2]"}, {{"p", 0.1}}, V, "unknown 'p'"));
  c.push_back(bad("dropout", {"f32[2]"}, {{"training", 1}}, T, "'training' of kind"));

  const std::string lg = "f32[8,10]";
  c.push_back(ok("cross_entropy", {lg, "i64[8]"}, {}, {"f32[]"}));
  c.push_back(ok("cross_entropy", {lg, "i32[8]"}, {{"reduction", "none"}}, {"f32[8]"}));
  c.push_back(ok("cross_entropy", {lg, "i64[8]"},
                 {{"reduction", "sum"}, {"label_smoothing", 0.1}, {"ignore_index", 0}}, {"f32[]"}));
  c.push_back(ok("cross_entropy", {lg, lg}, {}, {"f32[]"}));
  c.push_back(
      ok("cross_entropy", {"f16[b,s,V]", "i32[b,s]"}, {{"reduction", "none"}}, {"f16[b,s]"}));
  c.push_back(ok("cross_entropy", {"f32[?,10]", "i64[4]"}, {{"reduction", "none"}}, {"f32[4]"}));
  c.push_back(ok("cross_entropy", {"f32[?,10]", "f32[4,?]"}, {{"reduction", "none"}}, {"f32[4]"}));
  c.push_back(ok("cross_entropy", {"f32[10]", "i64[]"}, {{"reduction", "none"}}, {"f32[]"}));
  c.push_back(ok("cross_entropy", {"f32[0,10]", "u8[0]"}, {{"label_smoothing", 1}}, {"f32[]"}));
  c.push_back(bad("cross_entropy", {lg, "i64[7]"}, {}, V, "got 8 and 7"));
  c.push_back(bad("cross_entropy", {lg, "i64[8,10]"}, {}, V, "of shape [8]"));
  c.push_back(bad("cross_entropy", {lg, "f32[8]"}, {}, V, "of shape [8,10]"));
  c.push_back(bad("cross_entropy", {lg, "f16[8,10]"}, {}, T, "same dtype"));
  c.push_back(ok("cross_entropy_grad", {lg, "i64[8]", "f32[]"}, {}, {lg}));
  c.push_back(ok("cross_entropy_grad", {"bf16[b,s,V]", "i32[b,s]", "bf16[b,s]"},
                 {{"label_smoothing", 0.1}}, {"bf16[b,s,V]"}));
  c.push_back(bad("cross_entropy_grad", {lg, "f32[8,10]", "f32[]"}, {}, T, "integer class labels"));
  c.push_back(bad("cross_entropy_grad", {lg, "i64[7]", "f32[]"}, {}, V, "got 8 and 7"));
  c.push_back(bad("cross_entropy_grad", {lg, "i64[8]", "f32[3]"}, {}, V, "broadcastable to [8]"));
  c.push_back(ok("cross_entropy_grad", {"bf16[8,10]", "i64[8]", "f32[]"}, {}, {"bf16[8,10]"}));
  c.push_back(bad("cross_entropy_grad", {lg, "i64[8]", "i32[]"}, {}, T, "float dtype"));
  c.push_back(ok("cross_entropy", {"bf16[8,10]", "i64[8]"}, {{"f32_loss", true}}, {"f32[]"}));
  c.push_back(ok("cross_entropy", {"f16[8,10]", "i64[8]"},
                 {{"reduction", "none"}, {"f32_loss", true}}, {"f32[8]"}));
  c.push_back(ok("cross_entropy", {"f64[8,10]", "i64[8]"}, {{"f32_loss", true}}, {"f64[]"}));
  c.push_back(bad("cross_entropy", {lg, "i64[8]"}, {{"f32_loss", 1}}, T, "'f32_loss' of kind"));
  c.push_back(bad("cross_entropy", {lg, "bool[8]"}, {}, T, "integer class labels"));
  c.push_back(bad("cross_entropy", {"i32[8,10]", "i64[8]"}, {}, T, "float dtype"));
  c.push_back(bad("cross_entropy", {lg, "i64[8]"}, {{"label_smoothing", 1.5}}, V,
                  "label_smoothing in [0, 1]"));
  c.push_back(
      bad("cross_entropy", {lg, "i64[8]"}, {{"reduction", "avg"}}, V, "one of mean|sum|none"));
  c.push_back(bad("cross_entropy", {"f32[]", "i64[]"}, {}, V, "rank >= 1"));
}

// The backward ops of the pools and resize (src/ops/window_grad.cpp): x and a tensor of
// the forward output's shape (grads) or of x's shape (max_pool_gather).
void window_grad_cases(Cases& c) {
  const Attrs k22 = {{"kernel_shape", IntList{2, 2}}, {"strides", IntList{2, 2}}};
  c.push_back(ok("max_pool_grad", {"f32[1,2,4,4]", "f32[1,2,2,2]"}, k22, {"f32[1,2,4,4]"}));
  c.push_back(ok("max_pool_grad", {"f32[n,2,h,w]", "f32[n,2,h,w]"},
                 {{"kernel_shape", IntList{1, 1}}}, {"f32[n,2,h,w]"}));
  c.push_back(ok("max_pool_gather", {"f16[1,1,5,5]", "f16[1,1,5,5]"},
                 {{"kernel_shape", IntList{3, 3}}, {"strides", IntList{2, 2}}}, {"f16[1,1,2,2]"}));
  c.push_back(
      ok("avg_pool_grad", {"f64[2,3,6]", "f64[2,3,3]"},
         {{"kernel_shape", IntList{2}}, {"strides", IntList{2}}, {"count_include_pad", true}},
         {"f64[2,3,6]"}));
  c.push_back(ok("resize_grad", {"bf16[1,1,3,4]", "bf16[1,1,5,7]"},
                 {{"mode", "linear"}, {"sizes", IntList{1, 1, 5, 7}}}, {"bf16[1,1,3,4]"}));
  c.push_back(
      ok("resize_grad", {"f32[2,3]", "f32[4,1]"}, {{"scales", FloatList{2, 0.5}}}, {"f32[2,3]"}));
  c.push_back(bad("max_pool_grad", {"f32[1,2,4,4]", "f32[1,2,3,3]"}, k22, V, "got 2 and 3"));
  c.push_back(bad("max_pool_gather", {"f32[1,2,4,4]", "f32[1,2,4]"}, k22, V, "of shape [1,2,4,4]"));
  c.push_back(bad("avg_pool_grad", {"f32[1,2,4,4]", "f16[1,2,2,2]"}, k22, T, "same dtype"));
  c.push_back(bad("avg_pool_grad", {"f32[4,4]", "f32[2,2]"}, k22, V, "rank 3 to 5"));
  c.push_back(
      bad("resize_grad", {"i32[2,3]", "i32[4,6]"}, {{"sizes", IntList{4, 6}}}, T, "float dtype"));
  c.push_back(bad("max_pool_grad", {"f32[1,2,4,4]"}, k22, V, "expected 2 inputs"));
}

}  // namespace

std::vector<InferCase> nn_cases() {
  Cases c;
  softmax_cases(c);
  norm_cases(c);
  conv_cases(c);
  pool_cases(c);
  resize_cases(c);
  window_grad_cases(c);
  attention_cases(c);
  misc_cases(c);
  return c;
}

}  // namespace rlx::testing
