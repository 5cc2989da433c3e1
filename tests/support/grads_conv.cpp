// Gradient checks of the conv family (filled in with the family's rules).
#include "support/gradcheck.h"

namespace rlx::test {

GradTable grads_conv() { return {}; }

}  // namespace rlx::test
