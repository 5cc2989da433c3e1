// Axes as ops take them (NumPy's convention): -1 is the last dim. One definition for the
// ops, the transforms, the passes, the frontends and every backend's kernels (downstream
// packages too); shape inference has already checked the range (ops/infer_util.h
// normalize_axis names a bad one).
#pragma once

#include <cstdint>

namespace rlx {

// Axis `axis` in [-rank, rank) as an index in [0, rank).
constexpr int64_t norm_axis(int64_t axis, int64_t rank) { return axis < 0 ? axis + rank : axis; }

}  // namespace rlx
