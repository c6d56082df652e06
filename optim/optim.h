// optim: optimizers and learning-rate schedulers.
#pragma once

#include "optim/Adam.h"
#include "optim/Amp.h"
#include "optim/GradScaler.h"
#include "optim/LRScheduler.h"
#include "optim/Optimizer.h"
#include "optim/SGD.h"
