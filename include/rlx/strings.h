// String elements. A string tensor (DType::string) holds one handle per element: a pointer
// to an interned, immutable std::string, null for the empty string. Equal strings have equal
// handles and copying a handle copies the string, so the data-movement kernels (reshape,
// transpose, gather, concat, slice, where, …) run on string tensors as on 8-byte integers;
// ops that read characters (cast, onnx.string_normalizer) go through these functions.
// Interned strings live as long as the process (like a symbol table): a model's vocabulary
// and labels, not a stream of unbounded distinct text.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace rlx {

using StringHandle = const std::string*;

// The handle of `s` (null for ""); thread-safe.
StringHandle intern(std::string_view s);
inline std::string_view string_of(StringHandle h) { return h ? std::string_view(*h) : ""; }

}  // namespace rlx
