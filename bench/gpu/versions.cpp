// Prints what a GPU run actually loaded: the CUDA driver and runtime, cuBLAS,
// cuDNN and NCCL versions as the libraries report them, and the file each
// shared library was loaded from (read from /proc/self/maps).  bench/gpu/run.sh
// records it first, so every figure names the stack that produced it.
#include <cstdio>
#include <fstream>
#include <set>
#include <string>

#ifdef LOOM_WITH_CUDA
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>
#include <nccl.h>
#endif

namespace {

void print_loaded_libraries() {
  std::ifstream maps("/proc/self/maps");
  std::set<std::string> seen;
  std::string line;
  while (std::getline(maps, line)) {
    const auto slash = line.find('/');
    if (slash == std::string::npos) continue;
    const std::string path = line.substr(slash);
    for (const char* lib : {"libcudart", "libcublas", "libcudnn", "libnccl", "libcuda.so"}) {
      if (path.find(lib) != std::string::npos && seen.insert(path).second)
        std::printf("loaded: %s\n", path.c_str());
    }
  }
}

}  // namespace

int main() {
#ifdef LOOM_WITH_CUDA
  int driver = 0, runtime = 0, devices = 0;
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  const cudaError_t err = cudaGetDeviceCount(&devices);
  std::printf("cuda driver API: %d.%d\n", driver / 1000, (driver % 1000) / 10);
  std::printf("cuda runtime: %d.%d\n", runtime / 1000, (runtime % 1000) / 10);
  if (err == cudaSuccess)
    std::printf("cuda devices: %d\n", devices);
  else
    std::printf("cuda devices: none (%s)\n", cudaGetErrorString(err));
  int cublas = 0;
  cublasGetProperty(MAJOR_VERSION, &cublas);
  int cublas_minor = 0, cublas_patch = 0;
  cublasGetProperty(MINOR_VERSION, &cublas_minor);
  cublasGetProperty(PATCH_LEVEL, &cublas_patch);
  std::printf("cublas: %d.%d.%d\n", cublas, cublas_minor, cublas_patch);
  const size_t cudnn = cudnnGetVersion();
  std::printf("cudnn: %zu.%zu.%zu\n", cudnn / 10000, (cudnn % 10000) / 100, cudnn % 100);
  int nccl = 0;
  ncclGetVersion(&nccl);
  std::printf("nccl: %d.%d.%d\n", nccl / 10000, (nccl % 10000) / 100, nccl % 100);
  for (int d = 0; d < devices && err == cudaSuccess; ++d) {
    cudaDeviceProp p{};
    if (cudaGetDeviceProperties(&p, d) == cudaSuccess)
      std::printf("device %d: %s, sm_%d%d, %d SMs, %.1f GiB\n", d, p.name, p.major, p.minor,
                  p.multiProcessorCount, p.totalGlobalMem / 1073741824.0);
  }
#else
  std::printf("loom was built without CUDA\n");
#endif
  print_loaded_libraries();
  return 0;
}
