// Which CPU backend runs each convolution pass: loom's own kernels
// (tensor/cpu/Convolution.h; for float32 3x3 stride-1 passes also its
// Winograd F(2x2, 3x3) kernels, tensor/cpu/Winograd.h, timed against its
// direct ones: run_loom_conv_pass) or oneDNN's
// (tensor/cpu/OneDnnConvolution.h).
//
// LOOM_CPU_CONV (read once):
//   auto    (default) A float32 pass that both can run is timed with each
//           backend the first time its shape comes (twice each, interleaved;
//           like cudnn.benchmark), and the faster one runs that shape from then
//           on: the winner differs by CPU (AVX2 or AVX-512, AMD or Intel) and by
//           shape.  oneDNN's side may itself have several ways (Winograd,
//           layouts: OneDnnConvolution.h), decided before this timing.  Passes under ~2 M multiply-adds skip the timing and run
//           loom's (the reorders into oneDNN's layouts dominate there).
//   onednn  oneDNN wherever it has a kernel, else loom's
//   loom    loom's own kernels only
// A bfloat16 pass runs in oneDNN where it has a kernel for it (AVX512-BF16,
// AMX) unless LOOM_CPU_CONV=loom; native::conv2d asks conv_pass_runs first and
// computes in float32 (rounding once) where not.
// Because the choice is timed, two processes may pick differently for one
// shape (results then differ by float32 rounding); pin a backend for bitwise
// repeatable runs.
#pragma once

#include <cstdint>
#include <functional>

#include "tensor/DType.h"
#include "tensor/cpu/OneDnnConvolution.h"

namespace loom {
namespace cpu {

// Whether a pass of g in dtype has a kernel here: float32 and float64
// always (loom's), bfloat16 where oneDNN may run it.
bool conv_pass_runs(onednn::ConvPass pass, const native::ConvGeometry& g, DType dtype);

// Runs one pass of convolution g in dtype: run_loom or run_onednn, as chosen
// above.  Each callable must compute the whole pass into its outputs
// (overwriting them), so either may run several times while timing.
void run_conv_pass(onednn::ConvPass pass, const native::ConvGeometry& g, DType dtype,
                   const std::function<void()>& run_loom,
                   const std::function<void()>& run_onednn);

// Runs loom's side of one float32 pass: its Winograd kernels
// (tensor/cpu/Winograd.h) or its direct ones, whichever was timed faster
// the first time this shape came (each twice, interleaved), keyed like the
// choice above; direct alone where Winograd does not apply or the pass is
// too small to time.  Winograd wins
// where the products dominate its transforms (many channels, small images,
// few images); it loses where its transformed weights outweigh the work.
void run_loom_conv_pass(onednn::ConvPass pass, const native::ConvGeometry& g,
                        const std::function<void()>& run_winograd,
                        const std::function<void()>& run_direct);

// Whether this pass is settled on loom's kernels (pinned, no oneDNN kernel,
// too small to time, or timed slower in oneDNN): the backward then runs both
// of its passes in one call of loom's kernels, which share the im2col.
bool conv_pass_settled_on_loom(onednn::ConvPass pass, const native::ConvGeometry& g,
                               DType dtype);
// Whether this pass is settled on oneDNN (pinned, bfloat16, or timed faster):
// a backward with both passes settled there runs them in one call, which
// reorders the output gradient once.
bool conv_pass_settled_on_onednn(onednn::ConvPass pass, const native::ConvGeometry& g,
                                 DType dtype);

// What the timing chose so far, for tests and benchmarks: the number of
// shapes (pass, geometry, dtype, thread count) decided, and of those that went
// to oneDNN.
struct ConvChoiceStats {
  int64_t decided = 0, onednn = 0;
};
ConvChoiceStats conv_choice_stats();

}  // namespace cpu
}  // namespace loom
