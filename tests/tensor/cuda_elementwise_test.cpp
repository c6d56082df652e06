// CUDA elementwise ops (tensor/cuda/{Binary,Unary,UnaryBackward,Where}.cu)
// against the CPU kernels as the oracle: every op, every dtype, and the
// layouts the offset calculator must handle (transposed, narrowed, broadcast,
// 0-d, empty) as well as the dense vectorised loop (long contiguous runs,
// lengths that leave a tail, misaligned starts), and scalar operands passed
// to the kernels by value.  Tagged gpu; every case
// skips itself where no GPU is visible.
//
// Parity: float32 within 1e-5 relative (plus 1e-7 absolute for results near
// 0), float64 within 1e-12, integers and bool exactly; nan matches nan.  An op
// the CPU path rejects (bool arithmetic, ...) must be rejected on CUDA too.
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "tensor/CudaMemory.h"
#include "tensor/CudaRuntime.h"
#include "tensor/native/Binary.h"
#include "tensor/native/Copy.h"
#include "tensor/native/Unary.h"
#include "tensor/native/Where.h"
#include "tests/CudaTestUtil.h"

namespace loom {
namespace {

using testing_cuda::kGpu;
using testing_cuda::Parity;
using testing_cuda::sample;

using native::BinaryOp;
using native::UnaryOp;

const DType kAllDTypes[] = {kFloat32, kFloat64, kInt64, kInt32, kUInt8, kBool};
const DType kFloatDTypes[] = {kFloat32, kFloat64};
// Every op of the binary table (tensor/native/BinaryOps.h).
std::vector<BinaryOp> all_binary_ops() {
  std::vector<BinaryOp> out;
  optable::for_each_op(optable::BinaryOpList{}, [&](auto tag) {
    out.push_back(native::binary_op<typename decltype(tag)::type>());
  });
  return out;
}
const std::vector<BinaryOp> kBinaryOps = all_binary_ops();
// Every op of the unary table (tensor/native/UnaryOps.h), default parameters.
std::vector<UnaryOp> all_unary_ops() {
  std::vector<UnaryOp> out;
  optable::for_each_op(optable::UnaryOpList{}, [&](auto tag) {
    out.push_back(native::unary_op<typename decltype(tag)::type>());
  });
  return out;
}
const std::vector<UnaryOp> kUnaryOps = all_unary_ops();

class CudaElementwise : public testing_cuda::CudaTest {};

// Runs fn on the CPU inputs and on copies of them on the GPU (views are
// re-made on the GPU side by `view`, so the kernels see the same strides) and
// compares; when the CPU rejects the inputs, CUDA must reject them too.
::testing::AssertionResult SameOnBoth(const std::function<Tensor(const std::vector<Tensor>&)>& fn,
                                      const std::vector<Tensor>& cpu_inputs,
                                      const std::function<Tensor(const Tensor&)>& view = nullptr) {
  std::vector<Tensor> host, dev;
  for (const Tensor& t : cpu_inputs) {
    host.push_back(view ? view(t) : t);
    dev.push_back(view ? view(t.to(kGpu)) : t.to(kGpu));
  }
  Tensor expected;
  try {
    expected = fn(host);
  } catch (const Error& cpu_error) {
    try {
      fn(dev);
    } catch (const Error&) {
      return ::testing::AssertionSuccess();
    }
    return ::testing::AssertionFailure() << "CPU threw '" << cpu_error.what()
                                         << "' but CUDA did not";
  }
  try {
    return Parity(fn(dev), expected);
  } catch (const Error& e) {
    return ::testing::AssertionFailure() << "CUDA threw: " << e.what();
  }
}

std::string label(BinaryOp op, DType a, DType b, const std::string& layout) {
  return std::string(native::binary_op_name(op)) + "(" + dtype_name(a) + ", " + dtype_name(b) +
         ") " + layout;
}

Tensor binary_of(BinaryOp op, const std::vector<Tensor>& in) {
  return native::binary(op, in[0], in[1]);
}

// ---- binary ------------------------------------------------------------------------

TEST_F(CudaElementwise, EveryBinaryOpAndDTypeContiguous) {
  for (BinaryOp op : kBinaryOps)
    for (DType d : kAllDTypes) {
      // 105 elements: packs of 4 plus a tail.
      const Tensor a = sample(d, {3, 5, 7}, 1), b = sample(d, {3, 5, 7}, 2);
      EXPECT_TRUE(SameOnBoth([op](auto& in) { return binary_of(op, in); }, {a, b}))
          << label(op, d, d, "contiguous");
    }
}

TEST_F(CudaElementwise, LongContiguousRunsTakeTheVectorLoop) {
  for (BinaryOp op : {native::binary_op<optable::Add>(), native::binary_op<optable::Mul>(),
                      native::binary_op<optable::Div>(), native::binary_op<optable::Maximum>(),
                      native::binary_op<optable::Lt>()})
    for (DType d : kAllDTypes) {
      const Tensor a = sample(d, {1001, 67}, 3), b = sample(d, {1001, 67}, 4);
      EXPECT_TRUE(SameOnBoth([op](auto& in) { return binary_of(op, in); }, {a, b}))
          << label(op, d, d, "(1001, 67)");
    }
}

TEST_F(CudaElementwise, BinaryOnStridedAndMisalignedViews) {
  struct View {
    const char* name;
    std::function<Tensor(const Tensor&)> fn;
  };
  const std::vector<View> views = {
      {"transposed", [](const Tensor& t) { return t.transpose(0, 2); }},
      {"narrowed inner", [](const Tensor& t) { return t.narrow(2, 1, 5); }},
      {"narrowed outer (misaligned start)", [](const Tensor& t) { return t.narrow(0, 1, 5); }},
      {"selected", [](const Tensor& t) { return t.select(1, 3); }},
      {"permuted", [](const Tensor& t) { return t.permute({1, 2, 0}); }},
  };
  for (const View& v : views)
    for (BinaryOp op : kBinaryOps)
      for (DType d : kAllDTypes) {
        const Tensor a = sample(d, {6, 5, 7}, 5), b = sample(d, {6, 5, 7}, 6);
        EXPECT_TRUE(SameOnBoth([op](auto& in) { return binary_of(op, in); }, {a, b}, v.fn))
            << label(op, d, d, v.name);
      }
  // One operand strided, the other contiguous.
  for (DType d : kAllDTypes) {
    const Tensor a = sample(d, {7, 5}, 7).to(kGpu), b = sample(d, {5, 7}, 8).to(kGpu);
    EXPECT_TRUE(Parity(native::binary(native::binary_op<optable::Maximum>(), a.t(), b),
                       native::binary(native::binary_op<optable::Maximum>(), a.cpu().t(), b.cpu())))
        << dtype_name(d);
  }
}

// Channels-last operands (each alone the strided layout of a permuted
// view) take the dense loop once the layout orders dims by stride: the
// same values and the same output layout as the CPU, beside NCHW, per-channel
// and channels-last partners, in every dtype.
TEST_F(CudaElementwise, ChannelsLastOperands) {
  const auto last = [](const Tensor& t) { return t.contiguous(MemoryFormat::kChannelsLast); };
  for (BinaryOp op : {native::binary_op<optable::Add>(), native::binary_op<optable::Mul>(),
                      native::binary_op<optable::Maximum>()})
    for (DType d : {kFloat32, kFloat64, kFloat16, kBFloat16, kInt64, kBool}) {
      const Tensor a = sample(d, {2, 5, 3, 4}, 11), b = sample(d, {2, 5, 3, 4}, 12);
      const Tensor bias = sample(d, {1, 5, 1, 1}, 13);
      const std::vector<std::pair<std::string, std::vector<Tensor>>> pairs = {
          {"both channels last", {last(a), last(b)}},
          {"channels last and NCHW", {last(a), b}},
          {"NCHW and channels last", {a, last(b)}},
          {"channels last and a per-channel bias", {last(a), bias}},
      };
      for (const auto& [name, in] : pairs) {
        EXPECT_TRUE(SameOnBoth([op](auto& t) { return binary_of(op, t); }, in))
            << label(op, d, d, name);
        if (!is_floating_point(d)) continue;
        const Tensor host = binary_of(op, in);
        const Tensor dev = binary_of(op, {in[0].to(kGpu), in[1].to(kGpu)});
        EXPECT_EQ(dev.strides(), host.strides()) << label(op, d, d, name);
      }
    }
  for (DType d : {kFloat32, kFloat64, kFloat16, kBFloat16}) {
    const Tensor x = last(sample(d, {3, 7, 5, 2}, 14));
    EXPECT_TRUE(Parity(native::unary(native::unary_op<optable::Neg>(), x.to(kGpu), {}),
                       native::unary(native::unary_op<optable::Neg>(), x, {})))
        << dtype_name(d);
  }
}

TEST_F(CudaElementwise, BinaryBroadcasts) {
  const std::vector<std::pair<IntList, IntList>> shapes = {
      {{3, 1, 7}, {5, 1}},  // both sides broadcast
      {{3, 5, 7}, {7}},     // a row
      {{3, 5, 7}, {5, 1}},  // a column
      {{1}, {4, 9}},        // one element, dimensioned
      {{2, 3, 4, 5}, {1, 3, 1, 5}},
  };
  for (const auto& [sa, sb] : shapes)
    for (BinaryOp op : kBinaryOps)
      for (DType d : kAllDTypes) {
        const Tensor a = sample(d, sa, 9), b = sample(d, sb, 10);
        EXPECT_TRUE(SameOnBoth([op](auto& in) { return binary_of(op, in); }, {a, b}))
            << label(op, d, d, shape_str(sa) + " with " + shape_str(sb));
        EXPECT_TRUE(SameOnBoth([op](auto& in) { return binary_of(op, in); }, {b, a}))
            << label(op, d, d, shape_str(sb) + " with " + shape_str(sa));
      }
}

TEST_F(CudaElementwise, BinaryPromotesMixedDTypesAsTheCpuDoes) {
  for (BinaryOp op : kBinaryOps)
    for (DType da : kAllDTypes)
      for (DType db : kAllDTypes) {
        const Tensor a = sample(da, {4, 6}, 11), b = sample(db, {4, 6}, 12);
        EXPECT_TRUE(SameOnBoth([op](auto& in) { return binary_of(op, in); }, {a, b}))
            << label(op, da, db, "(4, 6)");
        // A 0-dim operand: does not widen a same-category tensor.
        const Tensor s = sample(db, {}, 13);
        EXPECT_TRUE(SameOnBoth([op](auto& in) { return binary_of(op, in); }, {a, s}))
            << label(op, da, db, "tensor with 0-dim");
      }
}

TEST_F(CudaElementwise, ZeroDimAndEmptyOperands) {
  for (BinaryOp op : kBinaryOps)
    for (DType d : kAllDTypes) {
      EXPECT_TRUE(SameOnBoth([op](auto& in) { return binary_of(op, in); },
                             {sample(d, {}, 14), sample(d, {}, 15)}))
          << label(op, d, d, "0-dim");
      EXPECT_TRUE(SameOnBoth([op](auto& in) { return binary_of(op, in); },
                             {sample(d, {0, 3}, 16), sample(d, {0, 3}, 17)}))
          << label(op, d, d, "(0, 3)");
      EXPECT_TRUE(SameOnBoth([op](auto& in) { return binary_of(op, in); },
                             {sample(d, {0, 3}, 18), sample(d, {3}, 19)}))
          << label(op, d, d, "(0, 3) with (3)");
    }
}

TEST_F(CudaElementwise, ScalarOperandsAndAlpha) {
  const Tensor x = sample(kFloat32, {33, 3}, 20).to(kGpu);
  EXPECT_TRUE(Parity(x * 2, x.cpu() * 2));
  EXPECT_TRUE(Parity(x + 0.5, x.cpu() + 0.5));
  EXPECT_TRUE(Parity(native::binary(native::binary_op<optable::Add>(), x, x.t().t(), 2.5),
                     native::binary(native::binary_op<optable::Add>(), x.cpu(), x.cpu(), 2.5)));
  EXPECT_TRUE(Parity(native::binary(native::binary_op<optable::Sub>(), x, x * 3, -1.5),
                     native::binary(native::binary_op<optable::Sub>(), x.cpu(), x.cpu() * 3, -1.5)));
  const Tensor i = sample(kInt64, {10}, 21).to(kGpu);
  EXPECT_TRUE(Parity(i * 3, i.cpu() * 3));
  EXPECT_TRUE(Parity(i * 0.5, i.cpu() * 0.5));  // float32, as PyTorch
  EXPECT_TRUE(Parity(native::binary(native::binary_op<optable::Add>(), i, i, 3),
                     native::binary(native::binary_op<optable::Add>(), i.cpu(), i.cpu(), 3)));
}

// A scalar operand (`x * 2`, `2 - x`, comparisons, in place) is a CPU 0-dim
// tensor (native::scalar_operand) that the kernels take by value: the only
// allocation is the output's, and there is no fill kernel.
TEST_F(CudaElementwise, ScalarOperandsTravelByValue) {
  const Tensor x = sample(kFloat32, {1000}, 22).to(kGpu);
  const Tensor c = x.cpu();
  cuda::synchronize(0);
  const int64_t before = cuda::memory_stats(0).num_allocs;
  const Tensor y = x * 2;
  EXPECT_EQ(cuda::memory_stats(0).num_allocs - before, 1);
  EXPECT_TRUE(y.is_cuda());
  EXPECT_TRUE(Parity(y, c * 2));
  EXPECT_TRUE(Parity(2.5 - x, 2.5 - c));
  EXPECT_TRUE(Parity(x / 3, c / 3));
  EXPECT_TRUE(Parity(3 / x, 3 / c));
  EXPECT_TRUE(Parity(x.gt(0.25), c.gt(0.25)));
  EXPECT_TRUE(Parity(x.eq(x.cpu().select(0, 7).item()), c.eq(c.select(0, 7).item())));
  // Strided and transposed operands, and the fallback for layouts of more
  // dims than a kernel takes (contiguous copies, the scalar left as is).
  const Tensor m = sample(kFloat32, {8, 9}, 23);
  EXPECT_TRUE(Parity(m.to(kGpu).t() * 4, m.t() * 4));
  const Tensor many = sample(kFloat32, {2, 2, 2, 2, 2, 2, 2, 2, 2}, 24);
  auto reversed = [](const Tensor& t) { return t.permute({8, 7, 6, 5, 4, 3, 2, 1, 0}); };
  EXPECT_TRUE(Parity(reversed(many.to(kGpu)) + 1.5, reversed(many) + 1.5));
  // In place, integers, and an integer tensor times a fraction (float32).
  Tensor g = x.clone(), h = c.clone();
  g.add_(1);
  h.add_(1);
  g.mul_(-0.5);
  h.mul_(-0.5);
  EXPECT_TRUE(Parity(g, h));
  const Tensor i = sample(kInt64, {10}, 25);
  EXPECT_TRUE(Parity(i.to(kGpu) * 3, i * 3));
  EXPECT_TRUE(Parity(i.to(kGpu) * 0.5, i * 0.5));
  const Tensor u = sample(kUInt8, {10}, 26);
  EXPECT_TRUE(Parity(u.to(kGpu) + 7, u + 7));
  // A user's CPU 0-dim tensor beside CUDA ones, as PyTorch allows; its
  // gradient comes back on the CPU.
  Tensor w = scalar_tensor(2.0).requires_grad_();
  const Tensor xr = x.detach().requires_grad_();
  (xr * w).sum().backward();
  ASSERT_TRUE(w.grad().defined());
  EXPECT_TRUE(w.grad().is_cpu());
  EXPECT_NEAR(w.grad().item(), c.sum().item(), 1e-3);
  EXPECT_TRUE(Parity(xr.grad(), full_like(c, 2.0)));
  // Written into, a CPU scalar must not take a CUDA operand.
  Tensor s0 = scalar_tensor(1.0);
  EXPECT_LOOM_ERROR(native::binary_(native::binary_op<optable::Mul>(), s0, x), "mul", "cuda:0",
                    "cpu");
}

TEST_F(CudaElementwise, SpecialFloatValues) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::nanf("");
  const Tensor a = tensor<float>({nan, 1, -inf, inf, 0, -0.0f, nan, 2});
  const Tensor b = tensor<float>({1, nan, inf, inf, 0, 0, nan, -3});
  for (BinaryOp op : kBinaryOps)
    EXPECT_TRUE(SameOnBoth([op](auto& in) { return binary_of(op, in); }, {a, b}))
        << native::binary_op_name(op);
}

// ---- in place ----------------------------------------------------------------------

TEST_F(CudaElementwise, InPlaceIntoStridedSelfWithBroadcastOther) {
  for (BinaryOp op : kBinaryOps)
    for (DType ds : kAllDTypes)
      for (DType dother : {kFloat64, kInt32, kBool}) {
        Tensor host = sample(ds, {5, 4}, 22);
        Tensor dev = host.to(kGpu);
        const Tensor other = sample(dother, {5}, 23);  // broadcast over dim 0 of the view
        bool cpu_threw = false;
        try {
          native::binary_(op, host.t(), other);
        } catch (const Error&) {
          cpu_threw = true;
        }
        if (cpu_threw) {
          EXPECT_THROW(native::binary_(op, dev.t(), other.to(kGpu)), Error)
              << label(op, ds, dother, "in place");
          continue;
        }
        native::binary_(op, dev.t(), other.to(kGpu));
        EXPECT_TRUE(Parity(dev, host)) << label(op, ds, dother, "in place, transposed self");
      }
}

TEST_F(CudaElementwise, InPlaceWithOtherAliasingSelf) {
  Tensor host = sample(kFloat32, {6, 6}, 24);
  Tensor dev = host.to(kGpu);
  native::binary_(native::binary_op<optable::Sub>(), host, host.t());
  native::binary_(native::binary_op<optable::Sub>(), dev, dev.t());
  EXPECT_TRUE(Parity(dev, host));
}

// ---- unary -------------------------------------------------------------------------

TEST_F(CudaElementwise, EveryUnaryOpAndDType) {
  for (UnaryOp op : kUnaryOps)
    for (DType d : kAllDTypes) {
      auto fn = [op](auto& in) { return native::unary(op, in[0]); };
      const std::string what = std::string(native::unary_op_name(op)) + " " + dtype_name(d);
      EXPECT_TRUE(SameOnBoth(fn, {sample(d, {1001, 13}, 25)})) << what;
      EXPECT_TRUE(SameOnBoth(fn, {sample(d, {6, 5, 7}, 26)},
                             [](const Tensor& t) { return t.transpose(0, 2).narrow(0, 1, 5); }))
          << what << " strided";
      EXPECT_TRUE(SameOnBoth(fn, {sample(d, {7}, 27)},
                             [](const Tensor& t) { return t.unsqueeze(0).expand({4, 7}); }))
          << what << " broadcast";
      EXPECT_TRUE(SameOnBoth(fn, {sample(d, {}, 28)})) << what << " 0-dim";
      EXPECT_TRUE(SameOnBoth(fn, {sample(d, {0, 4}, 29)})) << what << " empty";
    }
}

TEST_F(CudaElementwise, UnaryInPlaceOnAView) {
  for (UnaryOp op : kUnaryOps)
    for (DType d : kAllDTypes) {
      Tensor host = sample(d, {5, 6}, 30);
      Tensor dev = host.to(kGpu);
      try {
        native::unary_(op, host.t());
      } catch (const Error&) {
        EXPECT_THROW(native::unary_(op, dev.t()), Error) << native::unary_op_name(op);
        continue;
      }
      native::unary_(op, dev.t());
      EXPECT_TRUE(Parity(dev, host)) << native::unary_op_name(op) << " " << dtype_name(d);
    }
}

TEST_F(CudaElementwise, PowWithAScalarExponent) {
  for (DType d : kAllDTypes)
    for (double e : {0.0, 1.0, 2.0, 3.0, -1.0, -2.0, 0.5, -0.5, 1.7}) {
      auto fn = [e](auto& in) { return native::pow(in[0], e); };
      EXPECT_TRUE(SameOnBoth(fn, {sample(d, {37, 3}, 31)})) << dtype_name(d) << " ** " << e;
      EXPECT_TRUE(SameOnBoth(fn, {sample(d, {3, 37}, 32)},
                             [](const Tensor& t) { return t.t(); }))
          << dtype_name(d) << " ** " << e << " transposed";
    }
  for (DType d : {kInt64, kInt32, kUInt8})
    for (int64_t e : {0, 1, 2, 3, 4}) {
      auto fn = [e](auto& in) { return native::pow(in[0], Scalar(e)); };
      EXPECT_TRUE(SameOnBoth(fn, {sample(d, {50}, 33)})) << dtype_name(d) << " ** " << e;
    }
}

TEST_F(CudaElementwise, ClampAndClampInPlace) {
  using Bound = std::optional<Scalar>;
  const std::vector<std::pair<Bound, Bound>> bounds = {
      {Scalar(-1), Scalar(1)}, {Scalar(-0.5), std::nullopt}, {std::nullopt, Scalar(1.5)},
      {Scalar(2), Scalar(-2)}, {Scalar(-300), Scalar(300)}};
  for (DType d : kAllDTypes)
    for (const auto& [lo, hi] : bounds) {
      auto fn = [lo = lo, hi = hi](auto& in) { return native::clamp(in[0], lo, hi); };
      EXPECT_TRUE(SameOnBoth(fn, {sample(d, {9, 11}, 34)})) << dtype_name(d);
      EXPECT_TRUE(SameOnBoth(fn, {sample(d, {9, 11}, 35)}, [](const Tensor& t) { return t.t(); }))
          << dtype_name(d) << " transposed";
      Tensor host = sample(d, {9, 11}, 36);
      Tensor dev = host.to(kGpu);
      try {
        native::clamp_(host.t(), lo, hi);
      } catch (const Error&) {
        EXPECT_THROW(native::clamp_(dev.t(), lo, hi), Error) << dtype_name(d);
        continue;
      }
      native::clamp_(dev.t(), lo, hi);
      EXPECT_TRUE(Parity(dev, host)) << "clamp_ " << dtype_name(d);
    }
}

TEST_F(CudaElementwise, BackwardKernels) {
  for (DType d : kFloatDTypes) {
    const Tensor grad = sample(d, {17, 9}, 37);
    const Tensor saved = sample(d, {17, 9}, 38);
    for (UnaryOp op : kUnaryOps) {
      EXPECT_TRUE(SameOnBoth([op](auto& in) { return native::unary_backward(op, in[0], in[1]); },
                             {grad, saved}))
          << native::unary_op_name(op) << " " << dtype_name(d);
      // Broadcast-free but strided: both transposed.
      EXPECT_TRUE(SameOnBoth([op](auto& in) { return native::unary_backward(op, in[0], in[1]); },
                             {grad, saved}, [](const Tensor& t) { return t.t(); }))
          << native::unary_op_name(op) << " " << dtype_name(d) << " transposed";
    }
    for (double e : {0.0, 1.0, 2.0, 3.0, 0.5, -1.5})
      EXPECT_TRUE(SameOnBoth([e](auto& in) { return native::pow_backward(in[0], in[1], e); },
                             {grad, saved.abs()}))
          << "pow_backward " << e;
    EXPECT_TRUE(SameOnBoth(
        [](auto& in) { return native::clamp_backward(in[0], in[1], Scalar(-0.5), Scalar(1)); },
        {grad, saved}));
    EXPECT_TRUE(SameOnBoth(
        [](auto& in) { return native::clamp_backward(in[0], in[1], std::nullopt, Scalar(0)); },
        {grad, saved}));
  }
  // A float32 grad for a float64 saved tensor is converted first.
  EXPECT_TRUE(SameOnBoth(
      [](auto& in) { return native::unary_backward(native::unary_op<optable::Tanh>(), in[0], in[1]); },
      {sample(kFloat32, {5}, 39), sample(kFloat64, {5}, 40)}));
}

// ---- where, isclose ----------------------------------------------------------------

TEST_F(CudaElementwise, WhereEveryDTypeAndBroadcast) {
  auto fn = [](auto& in) { return native::where(in[0], in[1], in[2]); };
  for (DType d : kAllDTypes) {
    const Tensor c = sample(kBool, {4, 5, 6}, 41);
    EXPECT_TRUE(SameOnBoth(fn, {c, sample(d, {4, 5, 6}, 42), sample(d, {4, 5, 6}, 43)}))
        << dtype_name(d);
    EXPECT_TRUE(SameOnBoth(fn, {c, sample(d, {4, 5, 6}, 44), sample(d, {4, 5, 6}, 45)},
                           [](const Tensor& t) { return t.transpose(0, 2); }))
        << dtype_name(d) << " transposed";
    // Broadcast condition and branches, a 0-dim branch.
    EXPECT_TRUE(SameOnBoth(fn, {sample(kBool, {5, 1}, 46), sample(d, {4, 1, 6}, 47),
                                sample(d, {}, 48)}))
        << dtype_name(d) << " broadcast";
    EXPECT_TRUE(SameOnBoth(fn, {sample(kBool, {1001}, 49), sample(d, {1001}, 50),
                                sample(d, {}, 51)}))
        << dtype_name(d) << " dense with a scalar branch";
    EXPECT_TRUE(SameOnBoth(fn, {sample(kBool, {0}, 52), sample(d, {0}, 53), sample(d, {0}, 54)}))
        << dtype_name(d) << " empty";
  }
  // Mixed branch dtypes promote as a binary op does.
  EXPECT_TRUE(SameOnBoth(fn, {sample(kBool, {8}, 55), sample(kInt32, {8}, 56),
                              sample(kFloat64, {8}, 57)}));
}

TEST_F(CudaElementwise, IsClose) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::nanf("");
  const Tensor a = tensor<float>({1, 1, inf, inf, nan, 0, 1e-9f, 100});
  const Tensor b = tensor<float>({1, 1.000001f, inf, -inf, nan, 1e-9f, 0, 100.5f});
  EXPECT_TRUE(SameOnBoth([](auto& in) { return native::isclose(in[0], in[1], 1e-5, 1e-8); },
                         {a, b}));
  EXPECT_TRUE(SameOnBoth([](auto& in) { return native::isclose(in[0], in[1], 1e-2, 0); },
                         {sample(kFloat64, {30, 3}, 58), sample(kInt32, {3}, 59)}));
}

// ---- errors ------------------------------------------------------------------------

TEST_F(CudaElementwise, MixedCpuAndCudaInputsNameBothDevices) {
  const Tensor g = ones({2, 3}, kGpu), c = ones({2, 3});
  EXPECT_LOOM_ERROR(native::binary(native::binary_op<optable::Add>(), g, c), "add", "same device",
                    "cuda:0", "cpu");
  EXPECT_LOOM_ERROR(native::binary(native::binary_op<optable::Lt>(), c, g), "lt", "same device",
                    "cuda:0", "cpu");
  EXPECT_LOOM_ERROR(native::binary_(native::binary_op<optable::Mul>(), g, c), "mul", "cuda:0", "cpu");
  EXPECT_LOOM_ERROR(native::where(c.gt(0), g, g), "where", "cuda:0", "cpu");
  EXPECT_LOOM_ERROR(native::where(g.gt(0), g, c), "where", "cuda:0", "cpu");
  EXPECT_LOOM_ERROR(native::isclose(g, c, 1e-5, 1e-8), "isclose", "cuda:0", "cpu");
  EXPECT_LOOM_ERROR(native::unary_backward(native::unary_op<optable::Relu>(), c, g), "cuda:0", "cpu");
  EXPECT_LOOM_ERROR(g + c, "same device", "cuda:0", "cpu");
}

TEST_F(CudaElementwise, MoreUnmergeableDimsThanTheKernelTakes) {
  // Nine dims of size 2, reversed: no two neighbours merge, so the layout has
  // more dims than a kernel takes and the ops run on contiguous copies.
  const Tensor host = sample(kFloat32, {2, 2, 2, 2, 2, 2, 2, 2, 2}, 60);
  auto reversed = [](const Tensor& t) { return t.permute({8, 7, 6, 5, 4, 3, 2, 1, 0}); };
  EXPECT_TRUE(SameOnBoth(
      [](auto& in) { return native::unary(native::unary_op<optable::Exp>(), in[0]); }, {host},
      reversed));
  EXPECT_TRUE(SameOnBoth(
      [](auto& in) { return binary_of(native::binary_op<optable::Add>(), in); }, {host, host},
      reversed));
  // In place into a reversed self: computed contiguously, then copied back.
  Tensor h = host.clone(), d = host.to(kGpu);
  native::binary_(native::binary_op<optable::Mul>(), reversed(h), host);
  native::binary_(native::binary_op<optable::Mul>(), reversed(d), host.to(kGpu));
  EXPECT_TRUE(Parity(d, h));
}

}  // namespace
}  // namespace loom
