#include "rlx/version.h"

namespace rlx {

const char* version() { return RLX_VERSION; }

}  // namespace rlx
