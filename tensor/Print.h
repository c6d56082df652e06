// Printing hooks.  `operator<<(std::ostream&, const Tensor&)` (declared in
// tensor/Tensor.h, defined in tensor/Print.cpp) prints a tensor's grad_fn
// name, which only autograd/ knows; autograd/ installs the namer below when
// it is linked in, so tensor/ never depends on autograd/.
#pragma once

#include <string>

namespace loom {

class Tensor;

// Returns the name of t's grad_fn ("MulBackward"), or "" when it has none.
using GradFnNamer = std::string (*)(const Tensor& t);
void set_grad_fn_namer(GradFnNamer namer);

}  // namespace loom
