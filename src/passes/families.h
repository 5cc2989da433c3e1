// One registration function per group of passes; pass_manager.cpp calls them all.
#pragma once

#include "rlx/passes.h"

namespace rlx::passes {

void register_cleanup_passes(
    PassRegistry& r);  // cleanup.cpp etc.: dce, cse, constant_folding, simplify
void register_layout_passes(PassRegistry& r);  // layout.cpp: layout_sinking
void register_fusion_passes(PassRegistry& r);  // fusion: matmul / conv epilogues, bn, attention
void register_elementwise_fusion(PassRegistry& r);  // elementwise_fusion.cpp
void register_precision_passes(PassRegistry& r);    // mixed_precision.cpp

inline void register_core_passes(PassRegistry& r) {
  register_cleanup_passes(r);
  register_layout_passes(r);
  register_fusion_passes(r);
  register_elementwise_fusion(r);
  register_precision_passes(r);
}

}  // namespace rlx::passes
