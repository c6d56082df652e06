// CUDA softmax/log_softmax and losses (tensor/cuda/Softmax.cu, Loss.cu)
// against the CPU kernels as the oracle, forward and backward through
// autograd: every dim of 1-d to 3-d inputs (the row kernel with a warp or a
// block per row, and the lane kernel), transposed inputs, float64, odd and
// large sizes, 0-d and empty tensors; cross_entropy and nll_loss with class
// weights, ignore_index, label smoothing, every reduction and extra dims;
// mse_loss with broadcasting.  Tagged gpu; every case skips itself where no
// GPU is visible.
//
// Parity: float32 within 1e-5 relative plus 1e-6 absolute (GPU and CPU sum in
// different orders and use different exp approximations), float64 within
// 1e-12.
#include <cmath>
#include <string>
#include <vector>

#include "tensor/CudaMemory.h"
#include "tensor/CudaRuntime.h"
#include "tensor/cuda/StreamEvent.h"
#include "tests/CudaGradParity.h"

namespace loom {
namespace {

using testing_cuda::ForwardBackwardParity;
using testing_cuda::kGpu;
using testing_cuda::Parity;
using testing_cuda::sample;

class CudaSoftmaxLoss : public testing_cuda::CudaTest {};

const DType kFloatDTypes[] = {kFloat32, kFloat64};

// ---- softmax ------------------------------------------------------------------------

TEST_F(CudaSoftmaxLoss, SoftmaxEveryDimAndShape) {
  const std::vector<IntList> shapes = {{7}, {7, 13}, {3, 2000}, {5, 6, 7}, {2, 1, 33}, {1, 1}};
  for (DType dtype : kFloatDTypes)
    for (const IntList& shape : shapes)
      for (int64_t dim = -1; dim < static_cast<int64_t>(shape.size()); ++dim)
        for (bool log : {false, true}) {
          const Tensor x = sample(dtype, shape, 11, -8, 8);
          EXPECT_TRUE(ForwardBackwardParity(
              [&](const std::vector<Tensor>& in) {
                return log ? in[0].log_softmax(dim) : in[0].softmax(dim);
              },
              {x}, {true}))
              << dtype_name(dtype) << " " << shape_str(shape) << " dim " << dim
              << (log ? " log" : "");
        }
}

TEST_F(CudaSoftmaxLoss, SoftmaxLargeValuesAreStable) {
  // exp(300) overflows float; the max is subtracted first.
  const Tensor x = sample(kFloat32, {4, 50}, 3, 250, 350);
  for (bool log : {false, true})
    EXPECT_TRUE(ForwardBackwardParity(
        [&](const std::vector<Tensor>& in) {
          return log ? in[0].log_softmax(1) : in[0].softmax(1);
        },
        {x}, {true}));
}

TEST_F(CudaSoftmaxLoss, SoftmaxNonContiguousZeroDimAndEmpty) {
  const Tensor x = sample(kFloat64, {6, 9, 4}, 5);
  for (int64_t dim : {0, 1, 2})
    EXPECT_TRUE(ForwardBackwardParity(
        [&](const std::vector<Tensor>& in) { return in[0].softmax(dim); }, {x}, {true},
        [](const Tensor& t) { return t.transpose(0, 2); }));
  EXPECT_TRUE(ForwardBackwardParity(
      [](const std::vector<Tensor>& in) { return in[0].log_softmax(0); },
      {sample(kFloat32, {}, 1)}, {true}));
  for (const IntList& shape : {IntList{0, 5}, IntList{5, 0}, IntList{3, 0, 2}})
    EXPECT_TRUE(ForwardBackwardParity(
        [](const std::vector<Tensor>& in) { return in[0].softmax(1); },
        {sample(kFloat32, shape, 2)}, {true}));
  EXPECT_LOOM_ERROR(ones({2}, TensorOptions(kInt64).device(kGpu)).softmax(0),
                    "expected a floating-point tensor");
}

// ---- class losses -------------------------------------------------------------------

// Class indices for an (N, C, ...) input, with every fourth one set to
// `ignore` when ignore is not -1.
Tensor targets(IntList shape, int64_t C, int64_t ignore, uint64_t seed) {
  Generator gen(seed);
  Tensor t = randint(0, C, shape, kInt64, &gen);
  if (ignore != -1) {
    int64_t* p = t.data_ptr<int64_t>();
    for (int64_t i = 0; i < t.numel(); i += 4) p[i] = ignore;
  }
  return t;
}

TEST_F(CudaSoftmaxLoss, CrossEntropyEveryOption) {
  struct Shape {
    IntList input;
    IntList target;
  };
  const std::vector<Shape> shapes = {{{9, 7}, {9}},           {{3, 5, 4, 2}, {3, 4, 2}},
                                     {{2, 1500}, {2}},        {{6}, {}},
                                     {{1, 3, 5}, {1, 5}},     {{33, 2}, {33}}};
  const Reduction reductions[] = {Reduction::kNone, Reduction::kMean, Reduction::kSum};
  for (DType dtype : kFloatDTypes)
    for (const Shape& s : shapes) {
      const int64_t C = s.input.size() == 1 ? s.input[0] : s.input[1];
      const Tensor x = sample(dtype, s.input, 21, -4, 4);
      const Tensor w = sample(dtype, {C}, 22, 0.1, 2.0);
      for (int64_t ignore : {int64_t(-100), int64_t(1)})
        for (Reduction r : reductions)
          for (double eps : {0.0, 0.2})
            for (bool weighted : {false, true}) {
              const Tensor t = targets(s.target, C, s.target.empty() ? -1 : ignore, 23);
              EXPECT_TRUE(ForwardBackwardParity(
                  [&](const std::vector<Tensor>& in) {
                    return cross_entropy(in[0], in[1], r, ignore, eps,
                                         weighted ? in[2] : Tensor());
                  },
                  {x, t, w}, {true, false, false}))
                  << dtype_name(dtype) << " " << shape_str(s.input) << " ignore " << ignore
                  << " reduction " << static_cast<int>(r) << " eps " << eps << " weighted "
                  << weighted;
            }
    }
}

TEST_F(CudaSoftmaxLoss, NllLossEveryOption) {
  const Reduction reductions[] = {Reduction::kNone, Reduction::kMean, Reduction::kSum};
  for (DType dtype : kFloatDTypes)
    for (const IntList& shape : {IntList{9, 7}, IntList{3, 5, 4}, IntList{5}})
      for (Reduction r : reductions)
        for (bool weighted : {false, true}) {
          const int64_t C = shape.size() == 1 ? shape[0] : shape[1];
          IntList tshape;
          if (shape.size() > 1) {
            tshape.push_back(shape[0]);
            for (size_t d = 2; d < shape.size(); ++d) tshape.push_back(shape[d]);
          }
          const Tensor t = targets(tshape, C, tshape.empty() ? -1 : -100, 31);
          EXPECT_TRUE(ForwardBackwardParity(
              [&](const std::vector<Tensor>& in) {
                return nll_loss(in[0].log_softmax(shape.size() == 1 ? 0 : 1), in[1], r, -100,
                                weighted ? in[2] : Tensor());
              },
              {sample(dtype, shape, 32), t, sample(dtype, {C}, 33, 0.5, 1.5)},
              {true, false, false}))
              << dtype_name(dtype) << " " << shape_str(shape) << " reduction "
              << static_cast<int>(r) << " weighted " << weighted;
        }
}

TEST_F(CudaSoftmaxLoss, ClassLossesEmptyBatchAndAllIgnored) {
  // N = 0: the mean is 0 / 0 = nan on both devices, the sum 0.
  for (Reduction r : {Reduction::kMean, Reduction::kSum, Reduction::kNone})
    EXPECT_TRUE(ForwardBackwardParity(
        [&](const std::vector<Tensor>& in) { return cross_entropy(in[0], in[1], r); },
        {sample(kFloat32, {0, 4}, 1), zeros({0}, kInt64)}, {true, false}));
  const Tensor all_ignored = full({5}, Scalar(-100), kInt64);
  EXPECT_TRUE(ForwardBackwardParity(
      [](const std::vector<Tensor>& in) { return cross_entropy(in[0], in[1], Reduction::kSum); },
      {sample(kFloat64, {5, 3}, 2), all_ignored}, {true, false}));
}

TEST_F(CudaSoftmaxLoss, ClassLossBadTargetsThrowAtTheNextSyncPoint) {
  const Tensor x = sample(kFloat32, {4, 3}, 1).to(kGpu);
  const Tensor bad = tensor<int64_t>({0, 2, 3, 1}).to(kGpu);
  EXPECT_LOOM_ERROR(cross_entropy(x, bad).item(), "cross_entropy", "Target 3 is out of bounds");
  EXPECT_LOOM_ERROR((nll_loss(x, tensor<int64_t>({0, -1, 1, 1}).to(kGpu)), cuda::synchronize()),
                    "nll_loss", "Target -1 is out of bounds");
  EXPECT_LOOM_ERROR(cross_entropy(x, tensor<int64_t>({0, 1, 2, 1})), "same device");
}

// The training path queues work and returns: a classification step (forward,
// loss, backward) and the index ops leave the host free while the device is
// still busy with a long kernel queued before them.  Had any of them waited
// for the device (reading a check's answer or the loss's total weight back),
// the long kernel would have finished by the time they return.
TEST_F(CudaSoftmaxLoss, TrainingPathDoesNotWaitForTheDevice) {
  if (!cuda::device_memory_cached())
    GTEST_SKIP() << "LOOM_CUDA_NO_CACHING: every free is a cudaFree, which waits for the device";
  Tensor w = sample(kFloat32, {8, 5}, 3).to(kGpu).requires_grad_(true);
  const Tensor x = sample(kFloat32, {16, 8}, 4).to(kGpu);
  const Tensor y = tensor<int64_t>({0, 1, 2, 3, 4, 0, 1, 2, 3, 4, 0, 1, 2, 3, 4, -100}).to(kGpu);
  const Tensor idx = tensor<int64_t>({4, 0, 2}).to(kGpu);
  Tensor loss, picked;
  const auto work = [&] {
    loss = cross_entropy(matmul(x, w), y) + nll_loss(log_softmax(matmul(x, w), 1), y);
    loss.backward();
    picked = index_select(w, 0, idx) + embedding(w, idx) + gather(w, 0, idx.view({3, 1}));
  };
  work();  // warm up: handles, cached device and pinned blocks
  cuda::synchronize();
  const int device = kGpu.index;
  const uint64_t stream = cuda::current_stream_handle(device);
  cuda::sleep_cycles(2000LL * 1000 * 1000, device, stream);  // ~1 s
  work();
  EXPECT_FALSE(cuda::stream_query(device, stream)) << "an op waited for the device";
  EXPECT_TRUE(std::isfinite(loss.item<double>()));  // item() is a sync point
  EXPECT_TRUE(cuda::stream_query(device, stream));
  EXPECT_EQ(picked.sizes(), (IntList{3, 5}));
}

// ---- mse ----------------------------------------------------------------------------

TEST_F(CudaSoftmaxLoss, MseLossBroadcastReductionsAndEmpty) {
  const Reduction reductions[] = {Reduction::kNone, Reduction::kMean, Reduction::kSum};
  for (DType dtype : kFloatDTypes)
    for (Reduction r : reductions) {
      EXPECT_TRUE(ForwardBackwardParity(
          [&](const std::vector<Tensor>& in) { return mse_loss(in[0], in[1], r); },
          {sample(dtype, {3, 1001}, 41), sample(dtype, {1001}, 42)}, {true, true}));
      EXPECT_TRUE(ForwardBackwardParity(
          [&](const std::vector<Tensor>& in) { return mse_loss(in[0], in[1], r); },
          {sample(dtype, {4, 5}, 43), sample(dtype, {5, 4}, 44)}, {true, true},
          [](const Tensor& t) { return t.dim() == 2 && t.sizes()[0] == 5 ? t.t() : t; }));
      EXPECT_TRUE(ForwardBackwardParity(
          [&](const std::vector<Tensor>& in) { return mse_loss(in[0], in[1], r); },
          {sample(dtype, {0, 3}, 45), sample(dtype, {0, 3}, 46)}, {true, true}));
    }
}

}  // namespace
}  // namespace loom
