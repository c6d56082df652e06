// CUDA indexing, joins and dtype conversion against the CPU as the oracle,
// forward and backward through autograd: index_select / index_add / gather /
// scatter_add (tensor/cuda/Index.cu) along every dim with repeated indices,
// int32 indices, transposed operands, every dtype forward (atomics for the
// one-byte dtypes included), 0-d and empty cases; embedding and its backward;
// one_hot; the max/min backward; cat / stack (mixed dtypes, strided inputs,
// skipped empty inputs); and the conversion kernel (tensor/cuda/Convert.cu)
// for every dtype pair and layout, on one GPU and across host and GPU.  Bad
// indices throw the CPU's message.  Tagged gpu; every case skips itself where
// no GPU is visible.
#include <string>
#include <vector>

#include "tensor/DeferredChecks.h"
#include "tensor/native/Copy.h"
#include "tensor/native/Embedding.h"
#include "tests/CudaGradParity.h"

namespace loom {
namespace {

using testing_cuda::ForwardBackwardParity;
using testing_cuda::kGpu;
using testing_cuda::Parity;
using testing_cuda::sample;

class CudaIndex : public testing_cuda::CudaTest {};

const DType kAllDTypes[] = {kFloat32, kFloat64, kInt64, kInt32, kUInt8, kBool};
const DType kFloatDTypes[] = {kFloat32, kFloat64};

bool floating(DType d) { return d == kFloat32 || d == kFloat64; }

Tensor indices(IntList shape, int64_t limit, uint64_t seed, DType dtype = kInt64) {
  Generator gen(seed);
  return randint(0, limit, shape, dtype, &gen);
}

TEST_F(CudaIndex, IndexSelectEveryDimDTypeAndLayout) {
  for (DType dtype : kAllDTypes)
    for (int64_t dim : {0, 1, 2, -1})
      for (DType idtype : {kInt64, kInt32}) {
        const IntList shape = {4, 5, 6};
        const int64_t size = shape[dim < 0 ? 2 : dim];
        const Tensor idx = indices({9}, size, 3 + dim, idtype);  // repeats likely
        EXPECT_TRUE(ForwardBackwardParity(
            [&](const std::vector<Tensor>& in) { return index_select(in[0], dim, in[1]); },
            {sample(dtype, shape, 1), idx}, {floating(dtype), false}))
            << dtype_name(dtype) << " dim " << dim;
      }
  // Transposed self, 0-d self, empty index.
  EXPECT_TRUE(ForwardBackwardParity(
      [](const std::vector<Tensor>& in) { return index_select(in[0], 1, in[1]); },
      {sample(kFloat64, {7, 3}, 2), indices({5}, 7, 4)}, {true, false},
      [](const Tensor& t) { return t.dim() == 2 ? t.t() : t; }));
  EXPECT_TRUE(ForwardBackwardParity(
      [](const std::vector<Tensor>& in) { return index_select(in[0], 0, in[1]); },
      {sample(kFloat32, {}, 3), zeros({1}, kInt64)}, {true, false}));
  EXPECT_TRUE(ForwardBackwardParity(
      [](const std::vector<Tensor>& in) { return index_select(in[0], 0, in[1]); },
      {sample(kFloat32, {3, 2}, 3), zeros({0}, kInt64)}, {true, false}));
}

TEST_F(CudaIndex, IndexAddEveryDType) {
  for (DType dtype : kAllDTypes)
    for (int64_t dim : {0, 1}) {
      const Tensor idx = tensor<int64_t>({1, 0, 1, 1, 2});  // repeated on purpose
      IntList src_shape = {3, 4};
      src_shape[dim] = 5;
      const Tensor self = sample(dtype, {3, 4}, 5);
      const Tensor src = dim == 0 ? sample(dtype, {5, 4}, 6) : sample(dtype, {3, 5}, 6);
      EXPECT_TRUE(ForwardBackwardParity(
          [&](const std::vector<Tensor>& in) { return index_add(in[0], dim, in[1], in[2]); },
          {self, idx.narrow(0, 0, 5), src}, {floating(dtype), false, floating(dtype)}))
          << dtype_name(dtype) << " dim " << dim;
    }
}

TEST_F(CudaIndex, GatherAndScatterAddEveryDimAndLayout) {
  for (DType dtype : kAllDTypes)
    for (int64_t dim : {0, 1, 2}) {
      const IntList self_shape = {4, 5, 3};
      const Tensor idx = indices({3, 4, 2}, self_shape[dim], 7 + dim);
      EXPECT_TRUE(ForwardBackwardParity(
          [&](const std::vector<Tensor>& in) { return gather(in[0], dim, in[1]); },
          {sample(dtype, self_shape, 8), idx}, {floating(dtype), false}))
          << "gather " << dtype_name(dtype) << " dim " << dim;
      EXPECT_TRUE(ForwardBackwardParity(
          [&](const std::vector<Tensor>& in) { return scatter_add(in[0], dim, in[1], in[2]); },
          {sample(dtype, self_shape, 9), idx, sample(dtype, {3, 4, 3}, 10)},
          {floating(dtype), false, floating(dtype)}))
          << "scatter_add " << dtype_name(dtype) << " dim " << dim;
    }
  // Transposed self and src (the kernels read through strides).
  const Tensor idx = indices({3, 3}, 4, 11);
  EXPECT_TRUE(ForwardBackwardParity(
      [&](const std::vector<Tensor>& in) { return gather(in[0].t(), 0, in[1]); },
      {sample(kFloat64, {5, 4}, 12), idx}, {true, false}));
  EXPECT_TRUE(ForwardBackwardParity(
      [&](const std::vector<Tensor>& in) { return scatter_add(in[0].t(), 0, in[1], in[2].t()); },
      {sample(kFloat32, {5, 4}, 13), idx, sample(kFloat32, {3, 3}, 14)}, {true, false, true}));
  // Empty index.
  EXPECT_TRUE(ForwardBackwardParity(
      [&](const std::vector<Tensor>& in) { return gather(in[0], 1, in[1]); },
      {sample(kFloat32, {3, 4}, 15), zeros({3, 0}, kInt64)}, {true, false}));
}

// Index values are checked on the device and the error raised at the next
// point where the host waits (here cuda::synchronize), with the CPU's message.
TEST_F(CudaIndex, BadIndicesThrowTheCpuMessageAtTheNextSyncPoint) {
  const Tensor x = ones({3, 4}, kGpu);
  const Tensor bad = tensor<int64_t>({0, 4}).to(kGpu);
  EXPECT_LOOM_ERROR((index_select(x, 1, bad), cuda::synchronize()),
                    "index_select: index 4 is out of bounds for dimension 1 with size 4",
                    "found by a check that ran on cuda:0");
  EXPECT_LOOM_ERROR((gather(x, 0, tensor<int64_t>({0, -1, 2}, {1, 3}).to(kGpu)), cuda::synchronize()),
                    "gather: index -1 is out of bounds for dimension 0 with size 3");
  EXPECT_LOOM_ERROR(
      (scatter_add(x, 0, tensor<int64_t>({3}, {1, 1}).to(kGpu), ones({1, 1}, kGpu)), cuda::synchronize()),
      "scatter_add: index 3 is out of bounds");
  // item() and copies to the host are sync points too.
  EXPECT_LOOM_ERROR(embedding(x, tensor<int64_t>({1, 3}).to(kGpu)).sum().item(), "embedding: index 3",
                    "V = 3");
  // Reported once: later work runs.
  EXPECT_NO_THROW(cuda::synchronize());
  EXPECT_EQ(index_select(x, 1, tensor<int64_t>({3}).to(kGpu)).sum().item(), 3.0);
  // Device mismatches are argument errors, thrown at once.
  EXPECT_LOOM_ERROR(index_select(x, 0, tensor<int64_t>({0})), "same device");
}

TEST_F(CudaIndex, SyncChecksThrowFromTheOpItself) {
  const bool saved = sync_checks();
  set_sync_checks(true);
  const Tensor x = ones({3, 4}, kGpu);
  EXPECT_LOOM_ERROR(index_select(x, 1, tensor<int64_t>({0, 4}).to(kGpu)),
                    "index_select: index 4 is out of bounds for dimension 1 with size 4");
  EXPECT_EQ(pending_deferred_checks(), 0u);
  set_sync_checks(saved);
}

TEST_F(CudaIndex, EmbeddingAndItsBackward) {
  for (DType dtype : kFloatDTypes) {
    // Repeated rows accumulate in the backward (atomics on CUDA).
    const Tensor idx = tensor<int64_t>({2, 0, 2, 5, 2, 1}, {2, 3});
    EXPECT_TRUE(ForwardBackwardParity(
        [](const std::vector<Tensor>& in) { return embedding(in[0], in[1]); },
        {sample(dtype, {6, 33}, 16), idx}, {true, false}));
    EXPECT_TRUE(ForwardBackwardParity(
        [](const std::vector<Tensor>& in) { return embedding(in[0], in[1]); },
        {sample(dtype, {6, 4}, 17), indices({1000}, 6, 18, kInt32)}, {true, false}));
    EXPECT_TRUE(ForwardBackwardParity(
        [](const std::vector<Tensor>& in) { return embedding(in[0], in[1]); },
        {sample(dtype, {6, 4}, 17), zeros({0}, kInt64)}, {true, false}));
  }
}

TEST_F(CudaIndex, OneHot) {
  const Tensor idx = tensor<int64_t>({3, 0, 1, 3, 2, 0}, {2, 3});
  EXPECT_TRUE(Parity(one_hot(idx.to(kGpu)), one_hot(idx)));
  EXPECT_TRUE(Parity(one_hot(idx.to(kGpu), 6), one_hot(idx, 6)));
  // A bad class is reported once, at the next point where the host waits
  // (with num_classes given one_hot itself does not wait); num_classes = -1
  // reads the largest class back, so one_hot throws itself.
  EXPECT_LOOM_ERROR((one_hot(idx.to(kGpu), 3), cuda::synchronize()), "one_hot: class value 3");
  EXPECT_NO_THROW(cuda::synchronize());
  EXPECT_LOOM_ERROR((one_hot(tensor<int64_t>({1, -2}).to(kGpu), 4), cuda::synchronize()),
                    "non-negative", "-2");
  EXPECT_LOOM_ERROR(one_hot(tensor<int64_t>({1, -2}).to(kGpu)), "non-negative", "-2");
  EXPECT_NO_THROW(cuda::synchronize());
}

TEST_F(CudaIndex, MaxMinBackward) {
  for (DType dtype : kFloatDTypes)
    for (int64_t dim : {0, 1, 2})
      for (bool keepdim : {false, true}) {
        EXPECT_TRUE(ForwardBackwardParity(
            [&](const std::vector<Tensor>& in) { return std::get<0>(in[0].max(dim, keepdim)); },
            {sample(dtype, {3, 4, 5}, 19)}, {true}));
        EXPECT_TRUE(ForwardBackwardParity(
            [&](const std::vector<Tensor>& in) { return std::get<0>(in[0].min(dim, keepdim)); },
            {sample(dtype, {3, 4, 5}, 20)}, {true}));
      }
}

// ---- cat / stack --------------------------------------------------------------------

TEST_F(CudaIndex, CatAndStack) {
  for (int64_t dim : {0, 1, -1}) {
    EXPECT_TRUE(ForwardBackwardParity(
        [&](const std::vector<Tensor>& in) { return cat({in[0], in[1], in[2]}, dim); },
        {sample(kFloat32, {3, 4}, 21), sample(kFloat32, {3, 4}, 22), sample(kFloat32, {3, 4}, 23)},
        {true, true, true}));
    EXPECT_TRUE(ForwardBackwardParity(
        [&](const std::vector<Tensor>& in) { return stack({in[0], in[1]}, dim); },
        {sample(kFloat64, {3, 4}, 24), sample(kFloat64, {3, 4}, 25)}, {true, true}));
  }
  // Different sizes along dim, a transposed input, a skipped empty 1-d input,
  // a zero-size part.
  EXPECT_TRUE(ForwardBackwardParity(
      [](const std::vector<Tensor>& in) { return cat({in[0].t(), in[1], in[2], in[3]}, 1); },
      {sample(kFloat32, {5, 2}, 26), sample(kFloat32, {2, 3}, 27), zeros({0}, kFloat32),
       sample(kFloat32, {2, 0}, 28)},
      {true, true, false, true}));
  // Mixed dtypes promote (int32 + float64 -> float64), every dtype alone.
  const Tensor a = sample(kInt32, {2, 3}, 29), b = sample(kFloat64, {2, 2}, 30);
  EXPECT_TRUE(Parity(cat({a.to(kGpu), b.to(kGpu)}, 1), cat({a, b}, 1)));
  for (DType dtype : kAllDTypes) {
    const Tensor x = sample(dtype, {3, 2}, 31), y = sample(dtype, {1, 2}, 32);
    EXPECT_TRUE(Parity(cat({x.to(kGpu), y.to(kGpu)}, 0), cat({x, y}, 0))) << dtype_name(dtype);
  }
  EXPECT_LOOM_ERROR(cat({ones({2}, kGpu), ones({2})}, 0), "same device");
}

// ---- dtype conversion ---------------------------------------------------------------

TEST_F(CudaIndex, ConversionEveryDTypePairAndLayout) {
  for (DType from : kAllDTypes)
    for (DType to : kAllDTypes) {
      // (A negative float converted to uint8 is undefined behaviour in C++.)
      const Tensor x = sample(from, {5, 7}, 33, to == kUInt8 ? 0 : -3, 3);
      // On one GPU: contiguous, transposed source, transposed destination.
      EXPECT_TRUE(Parity(x.to(kGpu).to(to), x.to(to))) << dtype_name(from) << "->" << dtype_name(to);
      EXPECT_TRUE(Parity(x.to(kGpu).t().to(to), x.t().to(to)));
      Tensor dst = empty({7, 5}, TensorOptions(to).device(kGpu)).t();
      native::copy_(dst, x.to(kGpu));
      EXPECT_TRUE(Parity(dst, x.to(to)));
      // Host to GPU and GPU to host with a dtype change.
      EXPECT_TRUE(Parity(x.to(kGpu, to), x.to(to)));
      Tensor host = empty({5, 7}, to);
      native::copy_(host, x.to(kGpu));
      EXPECT_EQ(host.to(kFloat64).to_vector<double>(), x.to(to).to(kFloat64).to_vector<double>());
      // Broadcast source, empty.
      EXPECT_TRUE(Parity(x.narrow(0, 0, 1).to(kGpu).expand({4, 7}).to(to),
                         x.narrow(0, 0, 1).expand({4, 7}).to(to)));
      EXPECT_TRUE(Parity(empty({0, 3}, TensorOptions(from).device(kGpu)).to(to),
                         empty({0, 3}, from).to(to)));
    }
}

}  // namespace
}  // namespace loom
