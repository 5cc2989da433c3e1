// Gradient checks of the control family (filled in with the family's rules).
#include "support/gradcheck.h"

namespace rlx::test {

GradTable grads_control() { return {}; }

}  // namespace rlx::test
