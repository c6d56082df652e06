// Runs a kernel's grid on the calling host thread: blocks one after another,
// the threads of a block as fibers that switch at barriers and warp
// operations (loom_emu/Device.h).
#pragma once

#include <functional>

#include "loom_emu/Device.h"

namespace loom_emu {

// Runs `body` once per thread of `grid` x `block`.  Throws std::runtime_error
// when a block's threads cannot all reach a barrier (a deadlock on a GPU),
// and rethrows what a thread threw.
void run_grid(dim3 grid, dim3 block, const std::function<void()>& body,
              const char* file = nullptr, int line = 0);

// Writes where the fiber running on this host thread is (the launch's
// file:line, block and thread) into buf; false outside a kernel.  Safe in a
// signal handler.
bool describe_running_thread(char* buf, size_t size);

}  // namespace loom_emu
