#include "support/consistency.h"

namespace rlx::test {

CheckTable checks_conv() { return {}; }

}  // namespace rlx::test
