// Ops on float16 and bfloat16 tensors: every op of the unary and binary
// tables, the scalar ops, in-place forms, reductions and data movement give
// exactly the float32 result rounded once into the 16-bit type (reductions
// accumulate in float32), with PyTorch's result dtypes; so do losses,
// optimizer steps and batch norm (whose CPU kernels read bfloat16 as it is).
#include "tensor/CpuMemory.h"
#include "tensor/native/Binary.h"
#include "tensor/native/Loss.h"
#include "tensor/native/Normalization.h"
#include "tensor/native/Optim.h"
#include "tensor/native/Pooling.h"
#include "tensor/native/Unary.h"
#include "tests/HalfRounding.h"
#include "tests/TestUtil.h"

namespace loom {
namespace {

using native::BinaryOp;
using native::UnaryOp;

using testing::half_sample;
using testing::kHalfDTypes;
using testing::SameValues;
using testing::widened;

TEST(HalfOps, EveryUnaryOpIsTheRoundedFloat32Result) {
  for (DType d : kHalfDTypes) {
    const Tensor x = half_sample(d, {4, 33}, 1);
    optable::for_each_op(optable::UnaryOpList{}, [&](auto tag) {
      const UnaryOp op = native::unary_op<typename decltype(tag)::type>();
      const Tensor got = native::unary(op, x);
      EXPECT_EQ(got.dtype(), d) << native::unary_op_name(op);
      EXPECT_TRUE(SameValues(got, native::unary(op, widened(x)).to(d)))
          << native::unary_op_name(op) << " on " << dtype_name(d);
      Tensor inplace = x.clone();
      native::unary_(op, inplace);
      EXPECT_TRUE(SameValues(inplace, got)) << native::unary_op_name(op) << "_ on " << dtype_name(d);
    });
  }
}

TEST(HalfOps, EveryBinaryOpIsTheRoundedFloat32Result) {
  for (DType d : kHalfDTypes) {
    const Tensor a = half_sample(d, {4, 33}, 2), b = half_sample(d, {33}, 3).abs() + 0.5;
    optable::for_each_op(optable::BinaryOpList{}, [&](auto tag) {
      const BinaryOp op = native::binary_op<typename decltype(tag)::type>();
      const Tensor got = native::binary(op, a, b);
      const DType want = native::is_comparison(op) ? kBool : d;
      EXPECT_EQ(got.dtype(), want) << native::binary_op_name(op);
      EXPECT_TRUE(SameValues(got, native::binary(op, widened(a), widened(b)).to(want)))
          << native::binary_op_name(op) << " on " << dtype_name(d);
      if (!native::is_comparison(op)) {
        Tensor inplace = a.clone();
        native::binary_(op, inplace, b);
        EXPECT_TRUE(SameValues(inplace, got)) << native::binary_op_name(op) << "_";
      }
    });
  }
}

TEST(HalfOps, ScalarOperandsStayFloat32AndDoNotPromote) {
  // 0.1 is not a float16; x * 0.1 multiplies by float(0.1) and rounds once,
  // as PyTorch's kernels do.
  for (DType d : kHalfDTypes) {
    const Tensor x = half_sample(d, {50}, 4);
    const Tensor got = x * 0.1;
    EXPECT_EQ(got.dtype(), d);
    EXPECT_TRUE(SameValues(got, (widened(x) * 0.1f).to(d)));
    EXPECT_TRUE(SameValues(x + 1, (widened(x) + 1).to(d)));
    EXPECT_TRUE(SameValues(x.pow(2.5), widened(x).pow(2.5).to(d)));
    EXPECT_TRUE(SameValues(x.clamp(-1.5, 0.7), widened(x).clamp(-1.5, 0.7).to(d)));
    EXPECT_TRUE(SameValues(x.lt(0.3), widened(x).lt(0.3)));
    Tensor y = x.clone();
    y *= 0.1;
    EXPECT_TRUE(SameValues(y, got));
  }
}

TEST(HalfOps, MixedOperandsPromoteAsPyTorch) {
  const Tensor h = ones({3}, TensorOptions(kFloat16));
  const Tensor b = ones({3}, TensorOptions(kBFloat16));
  EXPECT_EQ((h + b).dtype(), kFloat32);
  EXPECT_EQ((h + ones({3})).dtype(), kFloat32);
  EXPECT_EQ((h + ones({3}, TensorOptions(kFloat64))).dtype(), kFloat64);
  EXPECT_EQ((h + arange(0, 3)).dtype(), kFloat16);
  EXPECT_EQ((arange(0, 3) * b).dtype(), kBFloat16);
  // A 0-dim float32 tensor does not promote a float16 one (same category).
  EXPECT_EQ((h + scalar_tensor(2.0, TensorOptions(kFloat32))).dtype(), kFloat16);
  EXPECT_EQ((arange(0, 3) + scalar_tensor(2.0, TensorOptions(kBFloat16))).dtype(), kBFloat16);
  EXPECT_EQ(arange(0, 3).exp().dtype(), kFloat32);
}

TEST(HalfOps, ReductionsAccumulateInFloat32) {
  for (DType d : kHalfDTypes) {
    // 4096 ones and a 2^-4: a 16-bit accumulator would stop at 2048 (float16)
    // or 256 (bfloat16); float32 accumulation gets 4096 exactly.
    EXPECT_EQ(ones({4096}, TensorOptions(d)).sum().item<double>(), 4096.0) << dtype_name(d);
    const Tensor x = half_sample(d, {6, 40, 5}, 5);
    EXPECT_TRUE(SameValues(x.sum(), widened(x).sum().to(d)));
    EXPECT_TRUE(SameValues(x.sum({1}), widened(x).sum({1}).to(d)));
    EXPECT_TRUE(SameValues(x.mean({0, 2}, true), widened(x).mean({0, 2}, true).to(d)));
    EXPECT_TRUE(SameValues(x.var({1}), widened(x).var({1}).to(d)));
    EXPECT_TRUE(SameValues(x.max(), widened(x).max().to(d)));
    EXPECT_TRUE(SameValues(std::get<0>(x.max(1)), std::get<0>(widened(x).max(1)).to(d)));
    EXPECT_TRUE(SameValues(x.argmax(2), widened(x).argmax(2)));
    EXPECT_EQ(x.sum().dtype(), d);
  }
}

TEST(HalfOps, DataMovementKeepsTheBits) {
  for (DType d : kHalfDTypes) {
    const Tensor x = half_sample(d, {5, 6}, 6);
    EXPECT_TRUE(SameValues(x.t().contiguous().t(), x));
    EXPECT_TRUE(SameValues(cat({x, x}, 0).narrow(0, 5, 5), x));
    EXPECT_TRUE(SameValues(stack({x, x}, 0).select(0, 1), x));
    const Tensor idx = full({2}, 3, TensorOptions(kInt64));
    EXPECT_TRUE(SameValues(x.index_select(0, idx), widened(x).index_select(0, idx).to(d)));
    EXPECT_TRUE(SameValues(where(x.gt(0), x, zeros_like(x)), x.relu()));
    EXPECT_EQ(full({2}, 0.5, TensorOptions(d)).to_vector<float>(), std::vector<float>({0.5f, 0.5f}));
    EXPECT_EQ(zeros({3}, TensorOptions(d)).sum().item<double>(), 0.0);
  }
}

TEST(HalfOps, PrintsLikeOtherFloats) {
  std::ostringstream out;
  out << full({2}, 1.5, TensorOptions(kBFloat16));
  EXPECT_NE(out.str().find("1.5000"), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("bfloat16"), std::string::npos) << out.str();
}

TEST(HalfOps, LossesAndOptimizerStepsComputeInFloat32) {
  for (DType d : kHalfDTypes) {
    const Tensor x = half_sample(d, {4, 5}, 7), target = tensor<int64_t>({0, 4, 2, 1});
    auto [nll, nll_weight] = native::nll_loss(x, target, Tensor(), native::LossReduction::kMean, -100);
    auto [nll32, nll32_weight] =
        native::nll_loss(widened(x), target, Tensor(), native::LossReduction::kMean, -100);
    EXPECT_TRUE(SameValues(nll, nll32.to(d)));
    EXPECT_TRUE(SameValues(cross_entropy(x, target), cross_entropy(widened(x), target).to(d)));
    EXPECT_TRUE(SameValues(mse_loss(x, x * 0.5), mse_loss(widened(x), (x * 0.5).to(kFloat32)).to(d)));
    // One SGD step with momentum on a 16-bit parameter: the float32 step,
    // rounded once (parameter and momentum buffer).
    Tensor p = x.clone(), buf = zeros_like(x);
    const Tensor g = half_sample(d, {4, 5}, 8);
    native::SGDHyper h;
    h.lr = 0.1;
    h.momentum = 0.9;
    native::sgd_update(p, g, buf, true, h);
    Tensor p32 = widened(x), buf32 = zeros_like(p32);
    native::sgd_update(p32, widened(g), buf32, true, h);
    EXPECT_TRUE(SameValues(p, p32.to(d)));
    EXPECT_TRUE(SameValues(buf, buf32.to(d)));
  }
}

// Batch norm on a 16-bit input, forward and backward, training and eval,
// float32 or 16-bit parameters: the float32 computation rounded once, float32
// statistics, running statistics updated alike.  On the CPU the bfloat16
// kernels widen in registers instead of through copies; their vector sums
// may group differently from the float32 kernels', so float32 results agree
// to float32 rounding and 16-bit ones to one unit in the last place.
TEST(HalfOps, BatchNormIsTheRoundedFloat32Result) {
  for (DType d : kHalfDTypes)
    for (bool training : {true, false})
      for (DType pd : {kFloat32, d}) {
        const std::string what = std::string(dtype_name(d)) + (training ? " train" : " eval") +
                                 ", parameters " + dtype_name(pd);
        const Tensor x = half_sample(d, {4, 6, 5, 7}, 9), dy = half_sample(d, {4, 6, 5, 7}, 10);
        const Tensor w = half_sample(kFloat32, {6}, 11).to(pd), b = half_sample(kFloat32, {6}, 12).to(pd);
        Tensor rm = half_sample(kFloat32, {6}, 13).to(pd), rv = (half_sample(kFloat32, {6}, 14).abs() + 0.5).to(pd);
        Tensor rm32 = widened(rm), rv32 = widened(rv);
        auto [y, mean, invstd] = native::batch_norm(x, rm, rv, w, b, training, 0.1, 1e-5);
        auto [y32, mean32, invstd32] =
            native::batch_norm(widened(x), rm32, rv32, widened(w), widened(b), training, 0.1, 1e-5);
        EXPECT_TRUE(testing::AllClose(widened(y), widened(y32.to(d)), 8e-3, 1e-6)) << what;
        EXPECT_EQ(y.dtype(), d) << what;
        EXPECT_TRUE(testing::AllClose(mean, mean32, 1e-5, 1e-7)) << what;
        EXPECT_TRUE(testing::AllClose(invstd, invstd32, 1e-5, 1e-7)) << what;
        EXPECT_TRUE(testing::AllClose(widened(rm), widened(rm32.to(pd)), 8e-3, 1e-6)) << what;
        EXPECT_TRUE(testing::AllClose(widened(rv), widened(rv32.to(pd)), 8e-3, 1e-6)) << what;
        Tensor gi, gw, gb, gi32, gw32, gb32;
        native::batch_norm_backward(dy, x, w, mean, invstd, training, true, true, true, gi, gw, gb);
        native::batch_norm_backward(widened(dy), widened(x), widened(w), mean32, invstd32, training, true,
                                    true, true, gi32, gw32, gb32);
        EXPECT_TRUE(testing::AllClose(widened(gi), widened(gi32.to(d)), 8e-3, 1e-6)) << what;
        EXPECT_EQ(gi.dtype(), d) << what;
        EXPECT_TRUE(testing::AllClose(widened(gw), widened(gw32.to(pd)), pd == kFloat32 ? 1e-5 : 8e-3, 1e-6)) << what;
        EXPECT_EQ(gw.dtype(), pd) << what;
        EXPECT_TRUE(testing::AllClose(widened(gb), widened(gb32.to(pd)), pd == kFloat32 ? 1e-5 : 8e-3, 1e-6)) << what;
      }
}

// Channels of bfloat16 that fit the per-thread buffer (N * S <= 2^16) are
// widened once and the passes run on float32 there; larger ones stream.
// Both give the statistics of the exact (float64) computation within float32
// accumulation error, and the float32 kernels' outputs rounded, with runs
// longer than one 1024-value chunk.  (The float32 kernels' own statistics
// accumulate a whole run in one float: further off than these in unoptimised
// builds, so the statistics are checked against float64.)
TEST(HalfOps, CpuBfloat16BatchNormCachedAndStreamedChannels) {
  for (const IntList& shape : {IntList{2, 3, 150, 200}, IntList{2, 2, 200, 200}}) {
    const Tensor x = half_sample(kBFloat16, shape, 40), dy = half_sample(kBFloat16, shape, 41);
    const int64_t C = shape[1];
    const Tensor w = half_sample(kFloat32, {C}, 42), b = half_sample(kFloat32, {C}, 43);
    auto [y, mean, invstd] = native::batch_norm(x, Tensor(), Tensor(), w, b, true, 0.1, 1e-5);
    auto [y64, mean64, invstd64] = native::batch_norm(
        x.to(kFloat64), Tensor(), Tensor(), w.to(kFloat64), b.to(kFloat64), true, 0.1, 1e-5);
    EXPECT_EQ(y.sizes(), y64.sizes());
    EXPECT_TRUE(testing::AllClose(mean.to(kFloat64), mean64, 1e-4, 1e-6)) << shape_str(shape);
    EXPECT_TRUE(testing::AllClose(invstd.to(kFloat64), invstd64, 1e-4, 1e-6)) << shape_str(shape);
    EXPECT_TRUE(testing::AllClose(widened(y), widened(y64.to(kBFloat16)), 8e-3, 1e-5)) << shape_str(shape);
    Tensor gi, gw, gb, gi64, gw64, gb64;
    native::batch_norm_backward(dy, x, w, mean, invstd, true, true, true, true, gi, gw, gb);
    native::batch_norm_backward(dy.to(kFloat64), x.to(kFloat64), w.to(kFloat64), mean64, invstd64,
                                true, true, true, true, gi64, gw64, gb64);
    EXPECT_TRUE(testing::AllClose(widened(gi), widened(gi64.to(kBFloat16)), 8e-3, 1e-5)) << shape_str(shape);
    EXPECT_TRUE(testing::AllClose(gw.to(kFloat64), gw64, 1e-4, 1e-3)) << shape_str(shape);
    EXPECT_TRUE(testing::AllClose(gb.to(kFloat64), gb64, 1e-4, 1e-3)) << shape_str(shape);
  }
}

// bfloat16 batch norm on the CPU reads and writes bfloat16 as it is: no
// float32 copy of the input or the output (the peak grows by the bfloat16
// output and the statistics, not by 4-byte copies).
TEST(HalfOps, CpuBatchNormOnBfloat16MakesNoFloat32Copies) {
  if (cpu::allocator_mode() != "caching") GTEST_SKIP() << "needs the caching CPU allocator's statistics";
  const Tensor x = half_sample(kBFloat16, {8, 16, 64, 64}, 15), dy = half_sample(kBFloat16, {8, 16, 64, 64}, 16);
  const int64_t bytes = x.nbytes();
  cpu::reset_peak_memory_stats();
  const int64_t before = cpu::memory_allocated();
  auto [y, mean, invstd] = native::batch_norm(x, Tensor(), Tensor(), Tensor(), Tensor(), true, 0.1, 1e-5);
  EXPECT_LT(cpu::max_memory_allocated() - before, bytes + 65536) << "forward";
  Tensor gi, gw, gb;
  cpu::reset_peak_memory_stats();
  const int64_t before_backward = cpu::memory_allocated();
  native::batch_norm_backward(dy, x, Tensor(), mean, invstd, true, true, true, true, gi, gw, gb);
  EXPECT_LT(cpu::max_memory_allocated() - before_backward, bytes + 65536) << "backward";
  EXPECT_EQ(y.dtype(), kBFloat16);
  EXPECT_EQ(gi.dtype(), kBFloat16);
  EXPECT_EQ(mean.dtype(), kFloat32);
}


// The CPU's bfloat16 elementwise kernels compute a short run at a time in
// float32 (cpu/StagedLoops.h): on tensors large enough for several runs and
// threads, strided, broadcast, with float32 scalars and in place, they give
// the float32 result rounded once, bit for bit.
TEST(HalfOps, CpuBfloat16ElementwiseIsTheRoundedFloat32ResultOnEveryLayout) {
  const Tensor a = half_sample(kBFloat16, {5, 70, 129}, 20), b = half_sample(kBFloat16, {5, 70, 129}, 21);
  const Tensor bt = half_sample(kBFloat16, {70, 5, 129}, 27).permute({2, 0, 1});
  const Tensor row = half_sample(kBFloat16, {129}, 22), column = half_sample(kBFloat16, {70, 1}, 23);
  const BinaryOp add = native::binary_op<optable::Add>(), mul = native::binary_op<optable::Mul>();
  auto rounded = [](const Tensor& t) { return t.to(kBFloat16); };
  EXPECT_TRUE(SameValues(native::binary(add, a, b), rounded(native::binary(add, widened(a), widened(b)))));
  const Tensor at = a.transpose(0, 2);
  EXPECT_TRUE(SameValues(native::binary(mul, at, bt), rounded(native::binary(mul, widened(at), widened(bt)))));
  EXPECT_TRUE(SameValues(native::binary(add, a, row), rounded(native::binary(add, widened(a), widened(row)))));
  EXPECT_TRUE(SameValues(native::binary(mul, column, a), rounded(native::binary(mul, widened(column), widened(a)))));
  EXPECT_TRUE(SameValues(a * 0.1, rounded(widened(a) * 0.1f)));
  EXPECT_TRUE(SameValues(a - 3, rounded(widened(a) - 3)));
  // In place, on a strided self, with a float32 tensor that narrows into it.
  Tensor y = a.clone();
  native::binary_(add, y.transpose(0, 2), bt);
  EXPECT_TRUE(SameValues(y, rounded(native::binary(add, widened(a), widened(bt.transpose(0, 2))))));
  const Tensor f = half_sample(kFloat32, {5, 70, 129}, 24);
  Tensor z = a.clone();
  native::binary_(mul, z, f);
  EXPECT_TRUE(SameValues(z, rounded(native::binary(mul, widened(a), f))));
  // Integers (not all bfloat16 values) and float64 operands are rounded once,
  // through float32, as before the 16-bit kernels.
  const Tensor big = arange(1000, 1000 + 129, 1, kInt64);
  EXPECT_TRUE(SameValues(native::binary(add, a, big), rounded(native::binary(add, widened(a), big.to(kFloat32)))));
  Tensor w = a.clone();
  native::binary_(add, w, big.to(kFloat64) + 0.3);
  EXPECT_TRUE(SameValues(w, rounded(native::binary(add, widened(a), (big.to(kFloat64) + 0.3).to(kFloat32)))));
  for (const UnaryOp op : {native::unary_op<optable::Relu>(), native::unary_op<optable::Sigmoid>(),
                           native::unary_op<optable::Exp>(), native::unary_op<optable::Tanh>()}) {
    EXPECT_TRUE(SameValues(native::unary(op, at), rounded(native::unary(op, widened(at)))))
        << native::unary_op_name(op);
    Tensor inplace = a.clone();
    native::unary_(op, inplace.transpose(0, 1));
    EXPECT_TRUE(SameValues(inplace, rounded(native::unary(op, widened(a))))) << native::unary_op_name(op);
    EXPECT_TRUE(SameValues(native::unary_backward(op, bt, at),
                          rounded(native::unary_backward(op, widened(bt), widened(at)))))
        << native::unary_op_name(op) << " backward";
  }
}

// ... and allocate nothing but their bfloat16 outputs.
TEST(HalfOps, CpuBfloat16ElementwiseMakesNoFloat32Copies) {
  if (cpu::allocator_mode() != "caching") GTEST_SKIP() << "needs the caching CPU allocator's statistics";
  const Tensor a = half_sample(kBFloat16, {8, 16, 64, 64}, 25), b = half_sample(kBFloat16, {8, 16, 64, 64}, 26);
  const int64_t bytes = a.nbytes();
  const UnaryOp relu = native::unary_op<optable::Relu>();
  auto growth = [&](const auto& run) {
    cpu::reset_peak_memory_stats();
    const int64_t before = cpu::memory_allocated();
    run();
    return cpu::max_memory_allocated() - before;
  };
  Tensor keep;
  EXPECT_LT(growth([&] { keep = native::binary(native::binary_op<optable::Add>(), a, b); }),
            bytes + 4096) << "add";
  EXPECT_LT(growth([&] { keep = a * 0.5; }), bytes + 4096) << "mul by a scalar";
  EXPECT_LT(growth([&] { keep = native::unary(relu, a); }), bytes + 4096) << "relu";
  EXPECT_LT(growth([&] { keep = native::unary_backward(relu, b, a); }), bytes + 4096) << "relu backward";
  Tensor c = a.clone();
  EXPECT_LT(growth([&] { native::binary_(native::binary_op<optable::Add>(), c, b); }), 4096) << "add_";
  EXPECT_LT(growth([&] { native::unary_(relu, c); }), 4096) << "relu_";
  EXPECT_EQ(keep.dtype(), kBFloat16);
}


// bfloat16 max pooling on the CPU runs a plane at a time in float32: the
// same values and indices as pooling the float32 tensor, gradients rounded
// once, for overlapping, padded, dilated and ceil-mode windows; and no
// float32 copy of the input or the gradient.
TEST(HalfOps, CpuBfloat16MaxPoolIsTheFloat32Result) {
  struct Case {
    IntList kernel, stride, padding, dilation;
    bool ceil;
  };
  const Tensor x = half_sample(kBFloat16, {3, 5, 23, 18}, 30);
  for (const Case& c : {Case{{3}, {2}, {1}, {1}, false}, Case{{2, 3}, {1, 2}, {0, 1}, {1}, true},
                        Case{{3}, {2}, {1}, {2}, false}, Case{{4}, {3}, {2}, {1}, true}}) {
    auto [y, ix] = native::max_pool2d_with_indices(x, c.kernel, c.stride, c.padding, c.dilation, c.ceil);
    auto [y32, ix32] = native::max_pool2d_with_indices(widened(x), c.kernel, c.stride, c.padding,
                                                       c.dilation, c.ceil);
    EXPECT_TRUE(SameValues(y, y32.to(kBFloat16)));
    EXPECT_TRUE(SameValues(ix, ix32));
    const Tensor g = half_sample(kBFloat16, y.sizes(), 31);
    EXPECT_TRUE(SameValues(
        native::max_pool2d_backward(g, x.sizes(), c.kernel, c.stride, c.padding, c.dilation,
                                    c.ceil, ix),
        native::max_pool2d_backward(widened(g), x.sizes(), c.kernel, c.stride, c.padding,
                                    c.dilation, c.ceil, ix)
            .to(kBFloat16)));
  }
  if (cpu::allocator_mode() != "caching") return;
  const Tensor big = half_sample(kBFloat16, {8, 16, 64, 64}, 32);
  cpu::reset_peak_memory_stats();
  const int64_t before = cpu::memory_allocated();
  auto [y, ix] = native::max_pool2d_with_indices(big, {3}, {2}, {1}, {1}, false);
  const Tensor gi = native::max_pool2d_backward(y, big.sizes(), {3}, {2}, {1}, {1}, false, ix);
  // The pooled output, its indices and the bfloat16 gradient; no 4-byte copies.
  EXPECT_LT(cpu::max_memory_allocated() - before, y.nbytes() + ix.nbytes() + gi.nbytes() + 65536);
}

}  // namespace
}  // namespace loom
