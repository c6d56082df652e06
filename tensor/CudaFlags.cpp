#include "tensor/CudaFlags.h"

#include <atomic>

namespace loom {
namespace cuda {
namespace {
std::atomic<bool> g_matmul_allow_tf32{false};
std::atomic<bool> g_matmul_allow_fp16_reduction{true};
std::atomic<bool> g_matmul_allow_bf16_reduction{true};
std::atomic<bool> g_cudnn_allow_tf32{true};
std::atomic<bool> g_cudnn_benchmark{false};
std::atomic<bool> g_cudnn_channels_last{true};
}  // namespace

void set_matmul_allow_tf32(bool allow) { g_matmul_allow_tf32 = allow; }
bool matmul_allow_tf32() { return g_matmul_allow_tf32; }
void set_matmul_allow_fp16_reduced_precision_reduction(bool allow) {
  g_matmul_allow_fp16_reduction = allow;
}
bool matmul_allow_fp16_reduced_precision_reduction() { return g_matmul_allow_fp16_reduction; }
void set_matmul_allow_bf16_reduced_precision_reduction(bool allow) {
  g_matmul_allow_bf16_reduction = allow;
}
bool matmul_allow_bf16_reduced_precision_reduction() { return g_matmul_allow_bf16_reduction; }
void set_cudnn_allow_tf32(bool allow) { g_cudnn_allow_tf32 = allow; }
bool cudnn_allow_tf32() { return g_cudnn_allow_tf32; }
void set_cudnn_benchmark(bool benchmark) { g_cudnn_benchmark = benchmark; }
bool cudnn_benchmark() { return g_cudnn_benchmark; }
void set_cudnn_channels_last(bool channels_last) { g_cudnn_channels_last = channels_last; }
bool cudnn_channels_last() { return g_cudnn_channels_last; }

}  // namespace cuda
}  // namespace loom
