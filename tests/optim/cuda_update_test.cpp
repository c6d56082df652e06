// CUDA optimizer steps (tensor/cuda/Optim.cu, multi-tensor) against the CPU
// update loops (tensor/cpu/Optim.cpp) as the oracle.
//
// The CUDA kernels do the CPU's operations in the CPU's order with one
// rounding each, so the direct tests below demand bit-equal parameters and
// state after every one of several steps, for SGD (momentum, dampening,
// nesterov, weight decay, maximize) and Adam/AdamW (amsgrad, maximize, weight
// decay), float32 and float64, odd sizes, one element and empty tensors.  The
// optimizer tests run whole trajectories through autograd with more
// parameters than one launch takes (48) and compare within Parity's
// tolerance.  Tagged gpu; every case skips itself where no GPU is visible.
#include <vector>

#include "tensor/native/Optim.h"
#include "tests/CudaTestUtil.h"

namespace loom {
namespace {

using testing_cuda::kGpu;
using testing_cuda::Parity;
using testing_cuda::sample;

class CudaUpdate : public testing_cuda::CudaTest {};

const std::vector<IntList> kShapes = {{7}, {3, 5}, {1}, {0}, {1025, 3}};

::testing::AssertionResult BitEqual(const Tensor& gpu, const Tensor& cpu) {
  if (gpu.sizes() != cpu.sizes() || gpu.dtype() != cpu.dtype())
    return ::testing::AssertionFailure() << gpu.describe() << " vs " << cpu.describe();
  const std::vector<double> a = gpu.to_vector<double>(), b = cpu.to_vector<double>();
  for (size_t i = 0; i < a.size(); ++i)
    if (!(a[i] == b[i]))
      return ::testing::AssertionFailure() << "element " << i << ": " << a[i] << " vs " << b[i];
  return ::testing::AssertionSuccess();
}

TEST_F(CudaUpdate, SgdStepsAreBitEqual) {
  struct Case {
    double momentum, dampening, weight_decay;
    bool nesterov, maximize;
  };
  const Case cases[] = {{0, 0, 0, false, false},     {0.9, 0, 0, false, false},
                        {0.9, 0.1, 0.01, false, false}, {0.9, 0, 0.01, true, false},
                        {0, 0, 0.05, false, true},   {0.5, 0.2, 0, true, true}};
  for (DType dtype : {kFloat32, kFloat64})
    for (const IntList& shape : kShapes)
      for (const Case& c : cases) {
        native::SGDHyper h;
        h.lr = 0.1;
        h.momentum = c.momentum;
        h.dampening = c.dampening;
        h.weight_decay = c.weight_decay;
        h.nesterov = c.nesterov;
        h.maximize = c.maximize;
        Tensor p = sample(dtype, shape, 1), pg = p.to(kGpu);
        Tensor buf = zeros(shape, dtype), bufg = buf.to(kGpu);
        const bool mom = c.momentum != 0;
        for (int step = 0; step < 4; ++step) {
          const Tensor g = sample(dtype, shape, 10 + step);
          native::sgd_update(p, g, mom ? buf : Tensor(), step == 0, h);
          native::sgd_update(pg, g.to(kGpu), mom ? bufg : Tensor(), step == 0, h);
          ASSERT_TRUE(BitEqual(pg, p)) << dtype_name(dtype) << " " << shape_str(shape)
                                       << " momentum " << c.momentum << " step " << step;
          if (mom) {
            ASSERT_TRUE(BitEqual(bufg, buf));
          }
        }
      }
}

TEST_F(CudaUpdate, AdamStepsAreBitEqual) {
  for (DType dtype : {kFloat32, kFloat64})
    for (const IntList& shape : kShapes)
      for (bool decoupled : {false, true})
        for (bool amsgrad : {false, true})
          for (double wd : {0.0, 0.02})
            for (bool maximize : {false, true}) {
              native::AdamHyper h;
              h.lr = 1e-2;
              h.beta1 = 0.9;
              h.beta2 = 0.999;
              h.eps = 1e-8;
              h.weight_decay = wd;
              h.amsgrad = amsgrad;
              h.maximize = maximize;
              h.decoupled = decoupled;
              Tensor p = sample(dtype, shape, 2), pg = p.to(kGpu);
              Tensor m = zeros(shape, dtype), v = zeros(shape, dtype), vmax = zeros(shape, dtype);
              Tensor mg = m.to(kGpu), vg = v.to(kGpu), vmaxg = vmax.to(kGpu);
              for (int step = 1; step <= 4; ++step) {
                h.step = step;
                const Tensor g = sample(dtype, shape, 20 + step);
                native::adam_update(p, g, m, v, amsgrad ? vmax : Tensor(), h);
                native::adam_update(pg, g.to(kGpu), mg, vg, amsgrad ? vmaxg : Tensor(), h);
                ASSERT_TRUE(BitEqual(pg, p)) << dtype_name(dtype) << " " << shape_str(shape)
                                             << " decoupled " << decoupled << " amsgrad "
                                             << amsgrad << " wd " << wd << " step " << step;
                ASSERT_TRUE(BitEqual(mg, m));
                ASSERT_TRUE(BitEqual(vg, v));
                if (amsgrad) {
                  ASSERT_TRUE(BitEqual(vmaxg, vmax));
                }
              }
            }
}

// Many parameters in one call: one of 321 chunks of 64K elements (more than
// a launch's 320 blocks, so it continues in the next launch), then more
// than the next launch's 48 parameters (three launches), empty ones among
// them; SGD and Adam bit-equal to the CPU.
TEST_F(CudaUpdate, ManyParametersAcrossLaunchesAreBitEqual) {
  std::vector<IntList> shapes;
  for (int k = 0; k < 70; ++k) {
    const int64_t n = k == 5 ? 321 * 65536 + 5 : k % 17 == 3 ? 0 : 7 * k + 1;
    shapes.push_back(IntList{n});
  }
  native::SGDHyper sh;
  sh.lr = 0.1;
  sh.momentum = 0.9;
  sh.weight_decay = 0.01;
  native::AdamHyper ah;
  ah.lr = 1e-2;
  ah.beta1 = 0.9;
  ah.beta2 = 0.999;
  ah.eps = 1e-8;
  ah.amsgrad = true;
  std::vector<native::SGDParam> sgd_cpu, sgd_gpu;
  std::vector<native::AdamParam> adam_cpu, adam_gpu;
  for (size_t k = 0; k < shapes.size(); ++k) {
    const IntList& shape = shapes[k];
    const Tensor p = sample(kFloat32, shape, 100 + k), g = sample(kFloat32, shape, 200 + k);
    sgd_cpu.push_back({p.clone(), g, zeros(shape), true});
    sgd_gpu.push_back({p.to(kGpu), g.to(kGpu), zeros(shape).to(kGpu), true});
    adam_cpu.push_back({p.clone(), g, zeros(shape), zeros(shape), zeros(shape), 1});
    adam_gpu.push_back({p.to(kGpu), g.to(kGpu), zeros(shape).to(kGpu), zeros(shape).to(kGpu),
                        zeros(shape).to(kGpu), 1});
  }
  ah.step = 1;
  native::sgd_update_many(sgd_cpu, sh);
  native::sgd_update_many(sgd_gpu, sh);
  native::adam_update_many(adam_cpu, ah);
  native::adam_update_many(adam_gpu, ah);
  for (size_t k = 0; k < shapes.size(); ++k) {
    ASSERT_TRUE(BitEqual(sgd_gpu[k].param.cpu(), sgd_cpu[k].param)) << "SGD parameter " << k;
    ASSERT_TRUE(BitEqual(sgd_gpu[k].momentum_buffer.cpu(), sgd_cpu[k].momentum_buffer)) << k;
    ASSERT_TRUE(BitEqual(adam_gpu[k].param.cpu(), adam_cpu[k].param)) << "Adam parameter " << k;
    ASSERT_TRUE(BitEqual(adam_gpu[k].exp_avg_sq.cpu(), adam_cpu[k].exp_avg_sq)) << k;
  }
}

TEST_F(CudaUpdate, GradientsAreConvertedAndMadeContiguous) {
  native::SGDHyper h;
  h.lr = 0.5;
  Tensor p = sample(kFloat32, {4, 3}, 3), pg = p.to(kGpu);
  const Tensor g = sample(kFloat64, {3, 4}, 4);
  native::sgd_update(p, g.t(), Tensor(), false, h);
  native::sgd_update(pg, g.to(kGpu).t(), Tensor(), false, h);
  EXPECT_TRUE(BitEqual(pg, p));
  EXPECT_LOOM_ERROR(native::sgd_update(pg, g.t().to(kFloat32), Tensor(), false, h), "SGD",
                    "gradient on");
}

// loss = sum(0.5 * c * p^2 + d * p) over `count` parameters of assorted sizes.
template <typename Make>
std::vector<Tensor> trajectory(Device device, DType dtype, int count, Make make) {
  std::vector<Tensor> params, cs, ds;
  for (int k = 0; k < count; ++k) {
    const IntList shape = {1 + (k * 7) % 13, 1 + k % 3};
    params.push_back(sample(dtype, shape, 100 + k).to(device).requires_grad_());
    cs.push_back(sample(dtype, shape, 300 + k, 0.5, 2.0).to(device));
    ds.push_back(sample(dtype, shape, 500 + k).to(device));
  }
  auto opt = make(params);
  for (int step = 0; step < 5; ++step) {
    opt.zero_grad();
    Tensor loss = zeros({}, TensorOptions(dtype).device(device));
    for (int k = 0; k < count; ++k)
      loss = loss + (0.5 * cs[k] * params[k] * params[k] + ds[k] * params[k]).sum();
    loss.backward();
    opt.step();
  }
  return params;
}

template <typename Make>
void expect_same_trajectory(Make make) {
  for (DType dtype : {kFloat32, kFloat64}) {
    const auto cpu = trajectory(Device(kCPU), dtype, 60, make);
    const auto gpu = trajectory(kGpu, dtype, 60, make);
    for (size_t k = 0; k < cpu.size(); ++k)
      EXPECT_TRUE(Parity(gpu[k].detach(), cpu[k].detach())) << dtype_name(dtype) << " param " << k;
  }
}

TEST_F(CudaUpdate, SgdTrajectoryMatchesTheCpu) {
  expect_same_trajectory([](std::vector<Tensor> ps) {
    return optim::SGD(ps, optim::SGDOptions(0.05).momentum(0.9).nesterov(true).weight_decay(1e-3));
  });
}

TEST_F(CudaUpdate, AdamTrajectoryMatchesTheCpu) {
  expect_same_trajectory([](std::vector<Tensor> ps) {
    return optim::Adam(ps, optim::AdamOptions(1e-2).amsgrad(true).weight_decay(1e-3));
  });
}

TEST_F(CudaUpdate, AdamWTrajectoryMatchesTheCpu) {
  expect_same_trajectory([](std::vector<Tensor> ps) {
    return optim::AdamW(ps, optim::AdamOptions(1e-2).weight_decay(1e-2));
  });
}

}  // namespace
}  // namespace loom
