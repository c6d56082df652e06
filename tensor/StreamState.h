// Thread-local state a stream carries from the submitting thread to the
// worker (tensor/Stream.h): get() runs at submit() on the submitting thread;
// set(value) runs on the worker before the closure, and set(previous) after
// it.  Registered once per process, from static initialisers: the on/off
// modes through tensor/ThreadLocalMode.h (GradMode, DeferWeightGrad,
// WeightReuse), autocast's state by hand (autograd/Autocast.cpp).
#pragma once

#include <cstdint>
#include <functional>

namespace loom {

struct StreamStateHook {
  std::function<int64_t()> get;
  std::function<void(int64_t)> set;
};
void register_stream_state(StreamStateHook hook);

}  // namespace loom
