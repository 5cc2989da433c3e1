// The vjp / jvp / vmap rules of the shape ops (src/ops/shape.cpp), one set per op.
#pragma once

#include "rlx/op.h"

namespace rlx::detail {

struct ShapeRules {
  VjpFn vjp;
  JvpFn jvp;
  VmapFn vmap;
};

ShapeRules reshape_rules();
ShapeRules transpose_rules();
ShapeRules broadcast_to_rules();
ShapeRules expand_dims_rules();
ShapeRules squeeze_rules();
ShapeRules slice_rules();
ShapeRules concat_rules();
ShapeRules split_rules();
ShapeRules pad_rules();
ShapeRules gather_rules();
ShapeRules gather_elements_rules();
ShapeRules gather_nd_rules();
ShapeRules scatter_elements_rules();
ShapeRules scatter_nd_rules();
ShapeRules tile_rules();
ShapeRules flip_rules();
ShapeRules sort_rules();  // sort and top_k: values differentiable, indices not
// dynamic_reshape: differentiable in x; vmap takes one target shape for all elements.
ShapeRules dynamic_reshape_rules();
// Nondifferentiable ops: vmap only.
ShapeRules one_hot_rules();
ShapeRules nonzero_rules();  // vmap: NotSupported (data-dependent output size)
ShapeRules shape_of_rules();

}  // namespace rlx::detail
