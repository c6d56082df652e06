// Raw dropout: checks and one generator draw; the mask loop is the backend's
// (tensor/cpu/Dropout.cpp, tensor/cuda/Dropout.cpp).
#include "tensor/native/Dropout.h"

#include "tensor/Factory.h"
#include "tensor/native/Copy.h"

namespace loom {
namespace native {

DispatchStub<DropoutKernel> dropout_stub("dropout");

std::tuple<Tensor, Tensor> dropout(const Tensor& input, double p, Generator* gen) {
  // float16/bfloat16: computed in float32, rounded once (no 16-bit kernel yet).
  if (input.defined() && is_reduced_float(input.dtype())) {
    auto [out, mask] = dropout(widen(input), p, gen);
    return {round_to(out, input.dtype()), mask};
  }
  check_defined("dropout", input, "input");
  LOOM_CHECK(p >= 0 && p <= 1, "dropout: probability has to be between 0 and 1, but got ", p);
  LOOM_CHECK(input.is_floating_point(), "dropout: expected a floating-point input, got ",
             input.describe());
  check_kernel_device("dropout", input);
  Generator& g = gen ? *gen : default_generator();
  uint64_t seed;
  {
    std::lock_guard<std::mutex> lock(g.mutex());
    seed = g.next_u64();
  }
  const TensorOptions options = TensorOptions(input.dtype()).device(input.device());
  Tensor out = empty(input.sizes(), options);
  Tensor mask = empty(input.sizes(), options);
  dropout_stub(input.device(), out, mask, contiguous(input), p, seed);
  return {out, mask};
}

}  // namespace native
}  // namespace loom
