// Gradient checks of the sliding-window ops: conv, conv_transpose, the pools, resize, and
// the backward ops their rules emit (max_pool_grad, max_pool_gather, avg_pool_grad,
// resize_grad). Random inputs keep window maxima apart by far more than the step.
#include "op_tables/gradcheck.h"

namespace rlx::test {

namespace {

using I = IntList;
using F = FloatList;

}  // namespace

GradTable grads_conv() {
  GradTable t;
  auto add = [&](const char* op, std::vector<std::vector<int64_t>> shapes, Attrs attrs,
                 std::string note) {
    t.add(grad_check(op, std::move(shapes), std::move(attrs), -1, 1, std::move(note)));
  };

  // conv: x [N, C, D...], w [M, C/groups, K...], bias [M].
  add("conv", {{2, 2, 5}, {3, 2, 3}, {3}}, {}, "1-D, bias");
  add("conv", {{1, 2, 5, 5}, {2, 2, 3, 3}, {2}}, {{"strides", I{2, 2}}, {"pads", I{1, 1, 1, 1}}},
      "strides, pads");
  add("conv", {{1, 4, 8}, {4, 2, 2}}, {{"groups", 2}, {"dilations", I{2}}, {"strides", I{2}}},
      "groups, dilation, a tail no window reaches");
  add("conv", {{1, 1, 9}, {1, 1, 2}}, {{"strides", I{3}}}, "tail longer than the dilation");
  add("conv", {{1, 3, 5, 4}, {3, 1, 2, 2}, {3}},
      {{"groups", 3}, {"strides", I{2, 1}}, {"auto_pad", "same_upper"}}, "depthwise, same_upper");
  add("conv", {{1, 1, 3, 3, 3}, {2, 1, 2, 2, 2}}, {{"auto_pad", "same_lower"}}, "3-D, same_lower");

  // conv_transpose: x [N, C, D...], w [C, M/groups, K...], bias [M].
  add("conv_transpose", {{2, 2, 4}, {2, 3, 3}, {3}}, {}, "1-D, bias");
  add("conv_transpose", {{1, 2, 3, 3}, {2, 2, 3, 3}},
      {{"strides", I{2, 2}}, {"pads", I{1, 1, 1, 1}}, {"output_padding", I{1, 1}}},
      "strides, pads, output_padding");
  add("conv_transpose", {{1, 4, 3}, {4, 1, 2}, {2}}, {{"groups", 2}, {"dilations", I{2}}},
      "groups, dilation");
  add("conv_transpose", {{1, 2, 3, 2}, {2, 1, 3, 3}},
      {{"strides", I{2, 2}}, {"auto_pad", "same_upper"}}, "same_upper");
  add("conv_transpose", {{1, 1, 4}, {1, 2, 3}}, {{"dilations", I{2}}, {"output_padding", I{1}}},
      "output_padding past the stride");
  add("conv_transpose", {{1, 1, 3}, {1, 1, 2}}, {{"strides", I{3}}, {"auto_pad", "same_lower"}},
      "same, kernel shorter than the stride");

  // The pools are piecewise linear (max) or linear (avg): their hvp must be 0.
  add("max_pool", {{1, 2, 4, 4}}, {{"kernel_shape", I{2, 2}}, {"strides", I{2, 2}}}, "2x2/2");
  add("max_pool", {{1, 1, 5, 5}},
      {{"kernel_shape", I{3, 3}},
       {"strides", I{2, 2}},
       {"pads", I{1, 1, 1, 1}},
       {"ceil_mode", true}},
      "overlapping, pads, ceil");
  add("max_pool", {{2, 2, 7}}, {{"kernel_shape", I{3}}, {"dilations", I{2}}}, "1-D dilation");
  add("max_pool", {{1, 1, 3, 3, 3}}, {{"kernel_shape", I{2, 2, 2}}, {"auto_pad", "same_upper"}},
      "3-D same_upper");
  add("avg_pool", {{1, 2, 4, 4}}, {{"kernel_shape", I{2, 2}}, {"strides", I{2, 2}}}, "2x2/2");
  add("avg_pool", {{1, 1, 5, 5}},
      {{"kernel_shape", I{3, 3}},
       {"strides", I{2, 2}},
       {"pads", I{1, 1, 1, 1}},
       {"count_include_pad", true}},
      "count_include_pad");
  add("avg_pool", {{1, 2, 6}},
      {{"kernel_shape", I{3}}, {"strides", I{2}}, {"pads", I{1, 1}}, {"ceil_mode", true}},
      "ceil, padding excluded");
  add("avg_pool", {{1, 2, 5, 4}}, {{"kernel_shape", I{2, 3}}, {"auto_pad", "same_lower"}},
      "same_lower");
  for (const char* op : {"global_max_pool", "global_avg_pool"}) {
    add(op, {{2, 2, 3, 3}}, {}, "2-D");
    add(op, {{1, 3, 5}}, {}, "1-D");
    add(op, {{1, 1, 2, 2, 2}}, {}, "3-D");
  }

  // resize is linear in x (nearest too: a gather).
  add("resize", {{1, 1, 3, 4}}, {{"mode", "linear"}, {"sizes", I{1, 1, 5, 7}}}, "linear sizes");
  add("resize", {{1, 2, 3, 4}},
      {{"mode", "linear"},
       {"scales", F{1, 1, 2, 0.5}},
       {"coordinate_transformation", "align_corners"}},
      "linear scales, align_corners");
  add("resize", {{2, 3}}, {{"sizes", I{5, 2}}, {"coordinate_transformation", "asymmetric"}},
      "nearest");
  add("resize", {{5}},
      {{"mode", "linear"}, {"sizes", I{8}}, {"coordinate_transformation", "asymmetric"}}, "1-D");
  add("resize", {{2, 3, 2}}, {{"mode", "linear"}, {"scales", F{1.5, 1, 2}}}, "every dim");

  // The backward ops: linear in their second input, piecewise constant in x.
  Attrs pool22 = {{"kernel_shape", I{2, 2}}, {"strides", I{2, 2}}};
  Attrs pool33 = {{"kernel_shape", I{3, 3}},
                  {"strides", I{2, 2}},
                  {"pads", I{1, 1, 1, 1}},
                  {"ceil_mode", true}};
  add("max_pool_grad", {{1, 2, 4, 4}, {1, 2, 2, 2}}, pool22, "2x2/2");
  add("max_pool_grad", {{1, 1, 5, 5}, {1, 1, 3, 3}}, pool33, "overlapping, ceil");
  add("max_pool_gather", {{1, 2, 4, 4}, {1, 2, 4, 4}}, {{"kernel_shape", I{2, 2}}}, "stride 1");
  add("max_pool_gather", {{1, 1, 5, 5}, {1, 1, 5, 5}}, pool33, "overlapping, ceil");
  Attrs avg = pool33;
  avg.set("count_include_pad", true);
  add("avg_pool_grad", {{1, 1, 5, 5}, {1, 1, 3, 3}}, avg, "count_include_pad");
  add("avg_pool_grad", {{1, 2, 6}, {1, 2, 4}},
      {{"kernel_shape", I{3}}, {"strides", I{2}}, {"pads", I{1, 1}}, {"ceil_mode", true}},
      "ceil, padding excluded");
  add("resize_grad", {{1, 1, 3, 4}, {1, 1, 5, 7}}, {{"mode", "linear"}, {"sizes", I{1, 1, 5, 7}}},
      "linear");
  add("resize_grad", {{2, 3}, {5, 2}}, {{"sizes", I{5, 2}}}, "nearest");
  return t;
}

}  // namespace rlx::test
