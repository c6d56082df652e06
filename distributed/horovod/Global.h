// The process-wide hvd state that init() creates, for the other hvd files.
// Private to distributed/horovod.
#pragma once

#include "distributed/horovod/Controller.h"

namespace loom {
namespace distributed {
namespace horovod {
namespace detail {

// The running controller; throws loom::Error starting with `who` when hvd
// is not initialised.  The reference stays valid until shutdown().
Controller& controller(const char* who);

}  // namespace detail
}  // namespace horovod
}  // namespace distributed
}  // namespace loom
