#include "support/consistency.h"

namespace rlx::test {

CheckTable checks_pool() { return {}; }

}  // namespace rlx::test
