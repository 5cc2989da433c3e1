#include "support/consistency.h"

namespace rlx::test {

CheckTable checks_random() { return {}; }

}  // namespace rlx::test
