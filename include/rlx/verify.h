// The graph verifier: SSA order, arity, attribute schemas, types, subgraph signatures.
#pragma once

#include "rlx/graph.h"

namespace rlx {

// Throws ValueError "[verify] …" describing the first problem found (node index, op).
// Checks: every value used belongs to g and is defined before use; each node's arity,
// attributes (against the op's schema) and output types (re-inferred) are right; output
// values are recorded with their producer; argument and output names are unique
// identifiers; subgraphs verify recursively and have no params.
void verify(const Graph& g);

}  // namespace rlx
