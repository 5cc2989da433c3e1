#include "support/consistency.h"

namespace rlx::test {

CheckTable checks_linalg() { return {}; }

}  // namespace rlx::test
