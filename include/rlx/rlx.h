// rlx: an ML compiler and runtime. Umbrella header of the public API.
#pragma once

#include "rlx/attrs.h"
#include "rlx/cpu_isa.h"
#include "rlx/device.h"
#include "rlx/dispatch.h"
#include "rlx/dtype.h"
#include "rlx/error.h"
#include "rlx/graph.h"
#include "rlx/kernel.h"
#include "rlx/literal.h"
#include "rlx/npy.h"
#include "rlx/op.h"
#include "rlx/ops.h"
#include "rlx/rules.h"
#include "rlx/safetensors.h"
#include "rlx/session.h"
#include "rlx/shape.h"
#include "rlx/strings.h"
#include "rlx/tensor.h"
#include "rlx/text.h"
#include "rlx/train.h"
#include "rlx/transforms.h"
#include "rlx/verify.h"
#include "rlx/version.h"

namespace rlx {
inline constexpr const char* kVersion = RLX_VERSION;
}
