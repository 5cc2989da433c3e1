// rlx's version: one number, set once (CMakeLists.txt's project() VERSION), which the
// library, the `rlx` CLI (--version), the Python package (rlx.__version__, its wheel's
// metadata through setup.py) and CHANGELOG.md's sections carry.
#pragma once

namespace rlx {

// The version the library was built as ("MAJOR.MINOR.PATCH"). Headers of another version
// compiled against it show as version() != kVersion (rlx/rlx.h).
const char* version();

}  // namespace rlx
