// loom: the whole public API in one include.
#pragma once

#include "autograd/Engine.h"
#include "autograd/GradMode.h"
#include "autograd/Gradcheck.h"
#include "autograd/Node.h"
#include "autograd/functions/Functions.h"
#include "data/data.h"
#include "nn/nn.h"
#include "optim/optim.h"
#include "tensor/Device.h"
#include "tensor/DType.h"
#include "tensor/Error.h"
#include "tensor/Factory.h"
#include "tensor/Generator.h"
#include "tensor/Parallel.h"
#include "tensor/Tensor.h"
#include "tensor/TensorOptions.h"
