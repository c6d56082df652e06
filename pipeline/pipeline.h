// loom::pipeline: Pipe (micro-batch pipelines over devices) and the balance
// helpers.  Link //pipeline.
#pragma once

#include "pipeline/Balance.h"
#include "pipeline/DeferredBatchNorm.h"
#include "pipeline/Pipe.h"
