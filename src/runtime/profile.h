// RLX_PROFILE=1: time every kernel call (on a device, between events on its stream), summed
// per op (and per input shape), printed to stderr at exit, slowest first. Off by default:
// one getenv read at start.
#pragma once

#include "rlx/graph.h"

namespace rlx {

bool profiling();
void record_op_time(const Node& n, double seconds);

}  // namespace rlx
