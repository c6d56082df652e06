// data: datasets, samplers and the DataLoader.
#pragma once

#include "data/DataLoader.h"
#include "data/Dataset.h"
#include "data/DistributedSampler.h"
#include "data/Sampler.h"
#include "data/datasets/MNIST.h"
#include "data/datasets/RandomClassification.h"
