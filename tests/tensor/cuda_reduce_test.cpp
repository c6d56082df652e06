// CUDA reductions (tensor/cuda/Reduce.cu) against the CPU kernels as the
// oracle: sum and mean over every set of dims of a 3-d tensor (keepdim or
// not), full reductions, max/min with their indices and argmax/argmin, for
// every dtype they take; both kernel shapes (rows: reduced dims innermost,
// short runs per warp and long runs per block; columns: a kept dim inside
// the reduced ones), non-contiguous inputs, ties and NaN (the first index
// wins, NaN beats numbers), 0-d and empty tensors, and reductions whose
// outputs are too few to fill the GPU, which cut the reduced axis into chunks
// combined in a second kernel (ReducePlan.h; ties across chunk borders keep
// the first index).  Tagged gpu; every case
// skips itself where no GPU is visible.
//
// Parity: float32 within 1e-5 relative (the GPU sums in double in a tree, the
// CPU in double in order), float64 within 1e-12, integers and indices exactly.
#include <cmath>
#include <string>
#include <vector>

#include "tensor/CudaRuntime.h"
#include "tensor/native/Reduce.h"
#include "tests/CudaTestUtil.h"

namespace loom {
namespace {

using testing_cuda::kGpu;

// Values in [-1, 1) (many ties among the integers).
Tensor sample(DType dtype, IntList sizes, uint64_t seed) {
  return testing_cuda::sample(dtype, sizes, seed + 84, -1.0, 1.0);
}

// Sums of many float32 terms: 1e-6 absolute near 0.
::testing::AssertionResult Parity(const Tensor& actual, const Tensor& expected) {
  return testing_cuda::Parity(actual, expected, 1e-6);
}

const DType kAllDTypes[] = {kFloat32, kFloat64, kInt64, kInt32, kUInt8, kBool};

class CudaReduce : public testing_cuda::CudaTest {};

std::string dims_str(const IntList& dims, bool keepdim) {
  return "dims " + shape_str(dims) + (keepdim ? " keepdim" : "");
}

// Every subset of {0, 1, 2} (the empty list means all dims), and two negative ones.
const std::vector<IntList> kDimSets = {{},     {0},    {1},    {2},       {0, 1}, {0, 2},
                                       {1, 2}, {0, 1, 2}, {-1}, {-3, -1}};

TEST_F(CudaReduce, SumEveryDimSetAndDType) {
  for (DType d : kAllDTypes)
    for (const IntList& dims : kDimSets)
      for (bool keepdim : {false, true}) {
        const Tensor x = sample(d, {4, 5, 6}, 1);
        EXPECT_TRUE(Parity(native::sum(x.to(kGpu), dims, keepdim), native::sum(x, dims, keepdim)))
            << dtype_name(d) << " " << dims_str(dims, keepdim);
      }
}

TEST_F(CudaReduce, MeanEveryDimSet) {
  for (DType d : {kFloat32, kFloat64})
    for (const IntList& dims : kDimSets)
      for (bool keepdim : {false, true}) {
        const Tensor x = sample(d, {4, 5, 6}, 2);
        EXPECT_TRUE(
            Parity(native::mean(x.to(kGpu), dims, keepdim), native::mean(x, dims, keepdim)))
            << dtype_name(d) << " " << dims_str(dims, keepdim);
      }
  EXPECT_LOOM_ERROR(native::mean(ones({3}, TensorOptions(kInt64).device(kGpu)), {}, false),
                    "mean", "floating");
}

TEST_F(CudaReduce, BothKernelShapesAndLongRuns) {
  // (outer, reduce, inner) views: short rows (warp each), long rows (block
  // each), columns, and one long full reduction.
  const std::vector<std::pair<IntList, IntList>> cases = {
      {{300, 7}, {1}},        // 300 short rows
      {{3, 5000}, {1}},       // long rows
      {{5000, 3}, {0}},       // columns: inner 3, reduce 5000
      {{2, 3000, 40}, {1}},   // columns with 40 outputs per outer
      {{70, 33, 9}, {0, 2}},  // non-adjacent dims: permuted, then rows
      {{1 << 20}, {}},        // a full reduction of a million values
  };
  for (DType d : {kFloat32, kFloat64, kInt32, kBool})
    for (const auto& [shape, dims] : cases) {
      const Tensor x = sample(d, shape, 3);
      const Tensor g = x.to(kGpu);
      const std::string what = dtype_name(d) + " " + shape_str(shape) + " " + dims_str(dims, false);
      EXPECT_TRUE(Parity(native::sum(g, dims, false), native::sum(x, dims, false))) << what;
      if (dims.size() == 1) {
        const auto [gv, gi] = native::max(g, dims[0], false);
        const auto [cv, ci] = native::max(x, dims[0], false);
        EXPECT_TRUE(Parity(gv, cv)) << what;
        EXPECT_TRUE(Parity(gi, ci)) << what;
      }
      if (dims.empty()) {
        EXPECT_TRUE(Parity(native::min(g), native::min(x))) << what;
        EXPECT_TRUE(Parity(native::argmin(g), native::argmin(x))) << what;
      }
    }
}

TEST_F(CudaReduce, NonContiguousInputs) {
  for (DType d : kAllDTypes) {
    const Tensor x = sample(d, {6, 5, 7}, 4);
    const Tensor g = x.to(kGpu);
    const std::vector<std::pair<Tensor, Tensor>> views = {
        {g.transpose(0, 2), x.transpose(0, 2)},
        {g.narrow(1, 1, 3), x.narrow(1, 1, 3)},
        {g.select(2, 4), x.select(2, 4)},
        {g.permute({1, 2, 0}), x.permute({1, 2, 0})}};
    for (const auto& [gv, cv] : views)
      for (const IntList& dims : std::vector<IntList>{{}, {0}, {1}, {0, 1}}) {
        if (static_cast<int64_t>(dims.size()) > cv.dim()) continue;
        EXPECT_TRUE(Parity(native::sum(gv, dims, true), native::sum(cv, dims, true)))
            << dtype_name(d) << " " << cv.describe() << " " << dims_str(dims, true);
        if (dims.size() == 1) {
          EXPECT_TRUE(Parity(native::argmax(gv, dims[0], true), native::argmax(cv, dims[0], true)))
              << dtype_name(d) << " " << cv.describe();
        }
      }
  }
}

TEST_F(CudaReduce, MaxMinValuesAndIndicesEveryDimAndDType) {
  for (DType d : kAllDTypes)
    for (int64_t dim : {0, 1, 2, -1})
      for (bool keepdim : {false, true}) {
        // Small integer ranges give many ties: the first index must win.
        const Tensor x = sample(d, {4, 5, 6}, 5);
        const Tensor g = x.to(kGpu);
        const std::string what = dtype_name(d) + " dim " + std::to_string(dim);
        const auto [gmax, gimax] = native::max(g, dim, keepdim);
        const auto [cmax, cimax] = native::max(x, dim, keepdim);
        EXPECT_TRUE(Parity(gmax, cmax)) << what;
        EXPECT_TRUE(Parity(gimax, cimax)) << what;
        const auto [gmin, gimin] = native::min(g, dim, keepdim);
        const auto [cmin, cimin] = native::min(x, dim, keepdim);
        EXPECT_TRUE(Parity(gmin, cmin)) << what;
        EXPECT_TRUE(Parity(gimin, cimin)) << what;
        EXPECT_TRUE(Parity(native::argmax(g, dim, keepdim), native::argmax(x, dim, keepdim)))
            << what;
        EXPECT_TRUE(Parity(native::argmin(g, dim, keepdim), native::argmin(x, dim, keepdim)))
            << what;
      }
}

TEST_F(CudaReduce, FullMaxMinArgmaxArgmin) {
  for (DType d : kAllDTypes) {
    const Tensor x = sample(d, {7, 9, 11}, 6);
    const Tensor g = x.to(kGpu);
    EXPECT_TRUE(Parity(native::max(g), native::max(x))) << dtype_name(d);
    EXPECT_TRUE(Parity(native::min(g), native::min(x))) << dtype_name(d);
    EXPECT_TRUE(Parity(native::argmax(g), native::argmax(x))) << dtype_name(d);
    EXPECT_TRUE(Parity(native::argmin(g), native::argmin(x))) << dtype_name(d);
  }
}

// Few outputs over a long reduced axis: the chunked kernels (ReducePlan.h).
TEST_F(CudaReduce, ChunkedReductionsOfFewOutputs) {
  struct Case {
    IntList shape;
    IntList dims;
  };
  // A full reduction (rows), two long rows, a sum over the batch of 64
  // columns, and a long middle dim between a kept outer and inner.
  const std::vector<Case> cases = {{{1 << 22}, {}}, {{2, 3000000}, {1}}, {{65536, 64}, {0}},
                                   {{3, 40000, 5}, {1}}};
  for (const Case& c : cases)
    for (DType d : {kFloat32, kFloat64, kInt64}) {
      const Tensor x = sample(d, c.shape, 9);
      const Tensor g = x.to(kGpu);
      const std::string what = std::string(dtype_name(d)) + " " + shape_str(c.shape) + " " +
                               dims_str(c.dims, false);
      EXPECT_TRUE(Parity(native::sum(g, c.dims, false), native::sum(x, c.dims, false))) << what;
      if (c.dims.size() == 1) {
        const auto [gv, gi] = native::max(g, c.dims[0], false);
        const auto [cv, ci] = native::max(x, c.dims[0], false);
        EXPECT_TRUE(Parity(gv, cv)) << what;
        EXPECT_TRUE(Parity(gi, ci)) << what;  // integers tie often: the first index wins
      } else {
        EXPECT_TRUE(Parity(native::argmax(g), native::argmax(x))) << what;
        EXPECT_TRUE(Parity(native::argmin(g), native::argmin(x))) << what;
      }
    }
  // The maximum repeated every 4096 values from index 1000 on, so copies sit
  // in every chunk: the first is reported.
  std::vector<float> v(1 << 22, 0.0f);
  for (size_t i = 1000; i < v.size(); i += 4096) v[i] = 7.0f;
  const Tensor ties = tensor<float>(v, {static_cast<int64_t>(v.size())}).to(kGpu);
  EXPECT_EQ(native::argmax(ties).item(), 1000.0);
  EXPECT_EQ(native::max(ties).item(), 7.0);
}

TEST_F(CudaReduce, NanWinsAndTheFirstNanIsReported) {
  const float nan = std::nanf(""), inf = std::numeric_limits<float>::infinity();
  const Tensor x = tensor<float>({1, nan, 3, nan, -inf, inf, 2, 2, 0, -inf, inf, -inf}, {3, 4});
  const Tensor g = x.to(kGpu);
  for (int64_t dim : {0, 1}) {
    const auto [gv, gi] = native::max(g, dim, false);
    const auto [cv, ci] = native::max(x, dim, false);
    EXPECT_TRUE(Parity(gv, cv));
    EXPECT_TRUE(Parity(gi, ci));
    const auto [gv2, gi2] = native::min(g, dim, false);
    const auto [cv2, ci2] = native::min(x, dim, false);
    EXPECT_TRUE(Parity(gv2, cv2));
    EXPECT_TRUE(Parity(gi2, ci2));
  }
  EXPECT_TRUE(Parity(native::argmax(g), native::argmax(x)));  // the first nan, index 1
  EXPECT_EQ(native::argmax(g).item(), 1.0);
  EXPECT_TRUE(std::isnan(native::sum(g, {}, false).item()));
  // Without nan, infinities are ordinary extremes.
  const Tensor y = tensor<float>({-inf, 5, inf, inf, -inf}).to(kGpu);
  EXPECT_EQ(native::argmax(y).item(), 2.0);
  EXPECT_EQ(native::argmin(y).item(), 0.0);
}

TEST_F(CudaReduce, ZeroDimAndEmptyTensors) {
  for (DType d : kAllDTypes) {
    const Tensor s = sample(d, {}, 7);
    const Tensor gs = s.to(kGpu);
    EXPECT_TRUE(Parity(native::sum(gs, {}, false), native::sum(s, {}, false))) << dtype_name(d);
    EXPECT_TRUE(Parity(native::max(gs), native::max(s))) << dtype_name(d);
    const auto [gv, gi] = native::max(gs, 0, true);
    const auto [cv, ci] = native::max(s, 0, true);
    EXPECT_TRUE(Parity(gv, cv)) << dtype_name(d);
    EXPECT_TRUE(Parity(gi, ci)) << dtype_name(d);

    // Summing an empty dim gives zeros; a tensor with no outputs gives none.
    const Tensor e = sample(d, {3, 0, 4}, 8);
    const Tensor ge = e.to(kGpu);
    EXPECT_TRUE(Parity(native::sum(ge, {1}, false), native::sum(e, {1}, false))) << dtype_name(d);
    EXPECT_TRUE(Parity(native::sum(ge, {}, false), native::sum(e, {}, false))) << dtype_name(d);
    EXPECT_TRUE(Parity(native::sum(ge, {0}, true), native::sum(e, {0}, true))) << dtype_name(d);
    // max over the non-empty dim 0 of a tensor with no elements: (0, 4) outputs.
    const auto [ev, ei] = native::max(ge, 0, false);
    EXPECT_EQ(ev.numel(), 0);
    EXPECT_EQ(ei.numel(), 0);
    EXPECT_LOOM_ERROR(native::max(ge, 1, false), "max", "size 0");
    EXPECT_LOOM_ERROR(native::max(ge), "max", "non-empty");
  }
  // The mean of nothing is nan, as on the CPU.
  const Tensor e = zeros({2, 0}, TensorOptions(kFloat32).device(kGpu));
  EXPECT_TRUE(Parity(native::mean(e, {1}, false), native::mean(e.cpu(), {1}, false)));
}

TEST_F(CudaReduce, MixedDevicesAndUnconvertedOps) {
  const Tensor g = ones({2, 3}, kGpu);
  // Reductions take one tensor; a CPU/CUDA mix shows up in the ops around them.
  EXPECT_LOOM_ERROR(native::sum(g, {0}, false) + ones({3}), "same device", "cuda:0", "cpu");
}

TEST_F(CudaReduce, VarAndStd) {
  // (The max/min backward is in cuda_index_test.)
  for (DType dtype : {kFloat32, kFloat64})
    for (bool take_sqrt : {false, true})
      for (int64_t correction : {0, 1}) {
        const Tensor x = testing_cuda::sample(dtype, {4, 5, 6}, 3);
        for (const IntList& dims : {IntList{}, IntList{0}, IntList{1}, IntList{0, 2}})
          for (bool keepdim : {false, true})
            EXPECT_TRUE(Parity(native::var(x.to(kGpu), dims, correction, keepdim, take_sqrt),
                               native::var(x, dims, correction, keepdim, take_sqrt)));
        EXPECT_TRUE(Parity(native::var(x.to(kGpu).transpose(0, 2), {1}, correction, false, take_sqrt),
                           native::var(x.transpose(0, 2), {1}, correction, false, take_sqrt)));
      }
  const Tensor e = empty({0, 3}, kGpu);
  EXPECT_TRUE(Parity(native::var(e, {0}, 1, false), native::var(e.cpu(), {0}, 1, false)));
}

}  // namespace
}  // namespace loom
