#include "support/consistency.h"

namespace rlx::test {

CheckTable checks_control() { return {}; }

}  // namespace rlx::test
