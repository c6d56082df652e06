// nn: modules, layers, losses, init and the model zoo.
#pragma once

#include "nn/Cloneable.h"
#include "nn/Init.h"
#include "nn/Module.h"
#include "nn/ModuleHolder.h"
#include "nn/OrderedDict.h"
#include "nn/Options.h"
#include "nn/Serialize.h"
#include "nn/models/ConvNet.h"
#include "nn/models/ResNet.h"
#include "nn/modules/Activation.h"
#include "nn/modules/BatchNorm.h"
#include "nn/modules/Container.h"
#include "nn/modules/Conv.h"
#include "nn/modules/Linear.h"
#include "nn/modules/Loss.h"
#include "nn/modules/Pooling.h"
