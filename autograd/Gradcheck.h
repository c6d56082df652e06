// gradcheck: compares the analytical Jacobian (from backward) with central
// finite differences, in float64, as torch.autograd.gradcheck does.
#pragma once

#include <functional>
#include <vector>

#include "tensor/Tensor.h"

namespace loom {
namespace autograd {

struct GradcheckOptions {
  double eps = 1e-6;
  double atol = 1e-5;
  double rtol = 1e-3;
};

// fn maps the inputs to one output tensor.  Every floating input that
// requires grad is checked (they should be float64; they may be
// non-contiguous views, but not expanded ones).  Returns true when all
// entries agree; otherwise throws loom::Error naming the input, the entry and
// both values.
bool gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& fn,
               const std::vector<Tensor>& inputs, GradcheckOptions options = {});

}  // namespace autograd
}  // namespace loom
