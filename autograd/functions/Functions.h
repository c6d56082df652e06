// Every differentiable op, by family.
#pragma once

#include "autograd/functions/Convolution.h"
#include "autograd/functions/Elementwise.h"
#include "autograd/functions/Linalg.h"
#include "autograd/functions/Loss.h"
#include "autograd/functions/Normalization.h"
#include "autograd/functions/Pooling.h"
#include "autograd/functions/Reduction.h"
#include "autograd/functions/Shape.h"
