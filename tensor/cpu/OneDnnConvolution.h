// CPU convolutions through oneDNN (Debian's libdnnl, 2.6), which picks AVX2,
// AVX-512, AVX512-BF16 or AMX kernels when it runs, on loom's NCHW buffers.
//
// Where oneDNN has no kernel (a dtype the CPU lacks, say) it is not
// available() and loom's own kernels run; which backend runs a pass that both
// can run is tensor/cpu/ConvChoice.h's business (LOOM_CPU_CONV).
//
// oneDNN runs on the calling thread's intra-op thread count
// (loom::get_num_threads), with its scratch memory and reordered copies from
// loom's CPU allocator, so concurrent convolutions on several CPU logical
// devices are safe.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "tensor/DType.h"
#include "tensor/native/ConvGeometry.h"

namespace loom {

struct TensorImpl;
namespace cpu {
namespace onednn {

using native::ConvGeometry;

enum class ConvPass { kForward, kBackwardData, kBackwardWeights };

// What LOOM_CPU_CONV selects, read once: "auto" (unset), "onednn" or "loom";
// any other value is a loom::Error.
const std::string& conv_backend();

// What LOOM_ONEDNN_LAYOUT selects for channels-last activations, read once:
// "auto" (unset: each pass of each shape timed once, NHWC as it is against
// oneDNN's blocked layouts through reorders and, for a 1x1 convolution with
// stride 1 and no bias, its matrix product on the NHWC buffers; the fastest
// kept), "nhwc", "blocked" or "matmul" (pinned: bitwise repeatable; "matmul"
// runs the other convolutions NHWC); any other value is a loom::Error.
const std::string& channels_last_layout();

// What LOOM_ONEDNN_ALGORITHM selects, read once: "auto" (unset: a float32
// 3x3 stride-1 pass is also timed in oneDNN's Winograd kernels, F(4x4, 3x3)
// on AVX-512, beside the layouts above; NCHW passes then have two ways),
// "direct" (never Winograd, neither oneDNN's nor loom's own F(2x2, 3x3) of
// tensor/cpu/Winograd.h: PyTorch's algorithm; bitwise repeatable with the
// layout pinned) or "winograd" (wherever oneDNN has a Winograd kernel for
// the pass); any other value is a loom::Error.  Winograd's transforms round
// more: ~1e-6 of the outputs' magnitude against ~1e-7 for direct kernels.
const std::string& conv_algorithm();

// Whether oneDNN has a kernel (not its slow reference loops) for this pass
// of this convolution in dtype on this CPU.
bool available(ConvPass pass, const ConvGeometry& g, DType dtype);

// oneDNN's name for the kernel that runs this pass of g here, e.g.
// "jit_wino_4x3:avx512_core" or "brg:avx512_core": the pass's one way, the
// way timed fastest, or "" before that timing (for tests and benchmarks).
// available() first.
std::string implementation(ConvPass pass, const ConvGeometry& g, DType dtype, bool bias);

// Which weight tensor a pass reads, at which version, for passes that may
// keep its reordered copy (tensor/WeightReuse.h): the tensor's version
// counter (shared by its views; kept alive by the copy, so no other tensor
// takes its address), the counter's value, and the tensor itself, not kept
// alive (prepare_kept_weights makes the copy of a later version from it).
// No counter: the pass reorders the weights for itself alone, as always.
struct WeightVersion {
  std::shared_ptr<const void> counter;
  uint64_t version = 0;
  std::weak_ptr<TensorImpl> tensor;
};

// The passes, on dense buffers of dtype (float32 or bfloat16): NCHW
// activations as tensor/cpu/Convolution.h's, or NHWC with g.channels_last;
// OIHW weights.  bias and grad_bias may be null.  Passes that read the
// weights reuse a copy kept for `weight_version` in the layout they want, or
// keep the one they make.
void conv2d_forward(const ConvGeometry& g, DType dtype, const void* input, const void* weight,
                    const void* bias, void* out, const WeightVersion& weight_version = {});
void conv2d_backward_data(const ConvGeometry& g, DType dtype, const void* weight,
                          const void* grad_out, void* grad_input,
                          const WeightVersion& weight_version = {});
void conv2d_backward_weights(const ConvGeometry& g, DType dtype, const void* input,
                             const void* grad_out, void* grad_weight, void* grad_bias);
// Both backward passes (grad_weight not null): the output gradient is
// reordered into the primitives' layout once when both read it in the same
// one (a quarter of the activation reorders of a training step).
void conv2d_backward(const ConvGeometry& g, DType dtype, const void* input, const void* weight,
                     const void* grad_out, void* grad_input, void* grad_weight, void* grad_bias,
                     const WeightVersion& weight_version = {});

// oneDNN's version ("2.6.3"), the instruction set its kernels use here
// ("avx512_core_bf16", "avx512_core_amx"), and both as "oneDNN 2.6.3, avx2"
// (for benchmark tables).
std::string version();
std::string effective_isa();
std::string describe();

}  // namespace onednn
}  // namespace cpu
}  // namespace loom
