// LOOM_HOST_DEVICE: marks a function both g++ and nvcc compile, for the host
// and (under nvcc) a CUDA device.
#pragma once

#if defined(__CUDACC__)
#define LOOM_HOST_DEVICE __host__ __device__
#else
#define LOOM_HOST_DEVICE
#endif
