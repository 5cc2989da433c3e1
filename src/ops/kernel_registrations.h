// How many kernels have been registered (kernel_registry.cpp): the runtime's compile cache
// keys on it.
#pragma once

#include <cstdint>

namespace rlx::detail {

// Kernels registered so far in any registry: a compile cached before a registration may
// resolve differently after it.
uint64_t kernel_registrations();

}  // namespace rlx::detail
