// amp::AutocastGuard on the CPU against PyTorch 1.13's
// torch.autocast("cpu", dtype=torch.bfloat16): the output dtype of every op
// of a table (tools/pyloom/autocast_reference.py), the ConvNet's and
// ResNet-18's logits, loss and gradients measured against the float32 step
// beside PyTorch's autocast (check_autocast_parity says why), and the guard's own rules (nesting, the weight-cast cache, stream
// closures, float64 and in-place ops untouched).
#include <algorithm>
#include <functional>
#include <iostream>
#include <map>
#include <sstream>

#include "tests/PythonRef.h"
#include "tests/TestUtil.h"

// One fixed set of kernels for the comparison with PyTorch: channels-last
// convolutions in oneDNN's NHWC kernels, not a per-shape timed choice
// between those and its blocked ones (tensor/cpu/OneDnnConvolution.h),
// whose different summation orders move the bfloat16 errors from run to
// run by as much as the two sides differ.  An explicit setting wins.
[[maybe_unused]] static const bool kPinnedLayout = (setenv("LOOM_ONEDNN_LAYOUT", "nhwc", 0), true);

namespace loom {
namespace {

using testing::RelativeErrorAtMost;

TEST(Autocast, OutputDTypesMatchPyTorchTable) {
  const Tensor x = randn({2, 3, 6, 6}), w = randn({4, 3, 3, 3}), m = randn({3, 3});
  const Tensor m3 = randn({2, 3, 3});
  const Tensor b = randn({3, 3}).to(kBFloat16);
  const Tensor t = tensor<int64_t>({0, 1, 2});
  const std::map<std::string, std::function<Tensor()>> ops = {
      {"conv2d", [&] { return conv2d(x, w); }},
      {"conv2d_float64", [&] { return conv2d(x.to(kFloat64), w.to(kFloat64)); }},
      {"linear", [&] { return linear(m, m, m.select(0, 0)); }},
      {"mm", [&] { return mm(m, m); }},
      {"bmm", [&] { return bmm(m3, m3); }},
      {"matmul", [&] { return matmul(m3, m); }},
      {"add_mixed", [&] { return m + b; }},
      {"mul_mixed", [&] { return m * b; }},
      {"where_mixed", [&] { return where(m.gt(0), m, b); }},
      {"cat_mixed", [&] { return cat({m, b}); }},
      {"stack_mixed", [&] { return stack({b, m}); }},
      {"cat_bf16", [&] { return cat({b, b}); }},
      {"softmax_f32", [&] { return softmax(m, 0); }},
      {"softmax_bf16", [&] { return softmax(b, 0); }},
      {"log_softmax_bf16", [&] { return log_softmax(b, 1); }},
      {"sum_bf16", [&] { return b.sum(); }},
      {"mean_bf16", [&] { return b.mean(); }},
      {"exp_bf16", [&] { return b.exp(); }},
      {"log_bf16", [&] { return (b.abs() + 1).log(); }},
      {"pow_bf16", [&] { return b.pow(2); }},
      {"relu_bf16", [&] { return b.relu(); }},
      {"sigmoid_bf16", [&] { return b.sigmoid(); }},
      {"tanh_bf16", [&] { return b.tanh(); }},
      {"gelu_bf16", [&] { return gelu(b); }},
      {"batch_norm_bf16",
       [&] { return batch_norm(b.view({1, 3, 3}), Tensor(), Tensor(), Tensor(), Tensor(), true); }},
      {"layer_norm_bf16", [&] { return layer_norm(b, {3}); }},
      {"group_norm_bf16", [&] { return group_norm(b.view({1, 3, 3}), 1); }},
      {"max_pool2d_bf16", [&] { return max_pool2d(b.view({1, 1, 3, 3}), {2}); }},
      {"avg_pool2d_bf16", [&] { return avg_pool2d(b.view({1, 1, 3, 3}), {2}); }},
      {"adaptive_avg_pool2d_bf16", [&] { return adaptive_avg_pool2d(b.view({1, 1, 3, 3}), {1}); }},
      {"dropout_bf16", [&] { return dropout(b, 0.5, true); }},
      {"mse_loss_bf16", [&] { return mse_loss(b, b); }},
      {"nll_loss_bf16", [&] { return nll_loss(b, t); }},
      {"cross_entropy_bf16", [&] { return cross_entropy(b, t); }},
      {"cross_entropy_f32", [&] { return cross_entropy(m, t); }},
  };
  std::string output;
  ASSERT_EQ(testing::run_python("autocast_reference.py", "", output), 0) << output;
  std::istringstream lines(output);
  std::string name, want;
  size_t checked = 0;
  amp::AutocastGuard autocast(kCPU);
  while (lines >> name >> want) {
    ASSERT_TRUE(ops.count(name)) << "no loom expression for PyTorch's row " << name;
    Tensor got;
    try {
      got = ops.at(name)();
    } catch (const Error& e) {
      ADD_FAILURE() << name << " threw: " << e.what();
      continue;
    }
    EXPECT_EQ(dtype_name(got.dtype()), want) << name;
    ++checked;
  }
  EXPECT_EQ(checked, ops.size()) << output;
}

// One training step of `model` under autocast in loom and in PyTorch from
// the same weights.  bfloat16 keeps 8 significant bits, and PyTorch 1.13's
// own autocast step is far from its float32 step (on CPUs without
// AVX512-BF16: 3% on the ConvNet's logits, 17% on ResNet-18's at batch 4,
// near 100% on some of its gradients, its bfloat16 batch norm losing most;
// with AVX512-BF16 about 2.5% on ResNet-18's logits), so loom's result is not
// compared with PyTorch's bfloat16 numbers directly.  Both are measured
// against the exact float32 step (which loom matches to 1e-4,
// tests/nn:torch_parity_test): loom's logits and loss within 2e-2 of it,
// and every result about as close to it as PyTorch's autocast result.
// The dtypes must agree with PyTorch's (bfloat16 logits, float32 loss and
// gradients).
void check_autocast_parity(const std::string& name, nn::Module& model, int64_t classes,
                           const Tensor& x, double logits_bound) {
  const std::string dir = testing::make_temp_dir();
  const Tensor y = randint(0, classes, {x.size(0)});
  nn::StateDict in;
  for (const auto& [k, v] : model.state_dict()) in.insert(k, v.clone().detach());
  in.insert("__input", x);
  in.insert("__target", y);
  nn::save(in, dir + "/in.safetensors");

  model.train();
  Tensor logits, loss;
  {
    amp::AutocastGuard autocast(kCPU);
    logits = model.forward(x);
    loss = cross_entropy(logits, y);
  }
  loss.backward();

  std::string output;
  ASSERT_EQ(testing::run_python("parity.py", name + " " + std::to_string(classes) + " " + dir +
                                                 "/in.safetensors " + dir + "/out.safetensors bf16",
                                output),
            0)
      << output;
  const nn::StateDict ref = nn::load(dir + "/out.safetensors");
  EXPECT_EQ(logits.dtype(), ref.at("logits").dtype()) << name;
  EXPECT_EQ(loss.dtype(), ref.at("loss").dtype()) << name;
  const auto error = [](const Tensor& got, const Tensor& exact, double floor) {
    return testing::relative_error(got.to(kFloat32), exact, floor);
  };
  for (const char* key : {"logits", "loss"}) {
    const Tensor& mine = std::string(key) == "logits" ? logits : loss;
    const double loom_error = error(mine, ref.at(std::string("f32.") + key), 1e-12);
    const double torch_error = error(ref.at(key), ref.at(std::string("f32.") + key), 1e-12);
    std::cout << name << " " << key << ": loom autocast " << loom_error
              << " from float32, PyTorch autocast " << torch_error << "\n";
    EXPECT_LE(loom_error, std::string(key) == "logits" ? logits_bound : 2e-2) << name << " " << key;
    EXPECT_LE(loom_error, std::max(torch_error, 2e-2)) << name << " " << key;
  }
  double scale = 0;
  for (const auto& [key, g] : ref)
    if (key.rfind("f32.grad.", 0) == 0) scale = std::max(scale, g.abs().max().item<double>());
  // Gradients that are rounding noise (a conv bias before batch norm) count
  // against the model's largest gradient.
  const double floor = 1e-3 * scale;
  double torch_worst = 0;
  for (const auto& [pname, p] : model.named_parameters())
    torch_worst = std::max(torch_worst, error(ref.at("grad." + pname),
                                              ref.at("f32.grad." + pname), floor));
  int closer = 0, checked = 0;
  std::vector<double> loom_errors, torch_errors;
  for (const auto& [pname, p] : model.named_parameters()) {
    ASSERT_TRUE(p.grad().defined()) << pname;
    EXPECT_EQ(p.grad().dtype(), ref.at("grad." + pname).dtype()) << pname;
    const Tensor& exact = ref.at("f32.grad." + pname);
    const double loom_error = error(p.grad(), exact, floor);
    const double torch_error = error(ref.at("grad." + pname), exact, floor);
    // Per gradient, never much worse than PyTorch's own autocast: within
    // 1.5x of its error.  Deep in ResNet-18 at batch 4 both are 30-60% off
    // float32 for some weights and batch-norm parameters (bfloat16 rounding
    // of near-cancelling sums), where which side comes closer depends on the
    // random weights and on each kernel's summation order (loom's channels-
    // last convolutions sum in another order than PyTorch's blocked ones):
    // where PyTorch's own error is over 25%, within the largest error its
    // autocast makes anywhere in the model.
    const double bound = torch_error > 0.25 ? std::max(1.5 * torch_error, torch_worst)
                                            : std::max(1.5 * torch_error, 2e-2);
    EXPECT_LE(loom_error, bound) << name << " grad of " << pname << ": loom autocast is "
                                 << loom_error << " from float32, PyTorch autocast "
                                 << torch_error << " (its largest: " << torch_worst << ")";
    closer += loom_error <= torch_error;
    ++checked;
    loom_errors.push_back(loom_error);
    torch_errors.push_back(torch_error);
  }
  std::cout << name << ": " << closer << " of " << checked
            << " gradients closer to float32 than PyTorch's autocast\n";
  // Across the model, loom's errors are no worse than PyTorch's: its median
  // and its largest gradient error within 10% of PyTorch's.  (Where PyTorch's
  // bfloat16 kernels are emulated -- CPUs without AVX512-BF16 -- loom is the
  // closer one for nine gradients in ten; where oneDNN has native bfloat16
  // kernels the two are about as close, loom ahead at the tail.)
  std::sort(loom_errors.begin(), loom_errors.end());
  std::sort(torch_errors.begin(), torch_errors.end());
  const size_t mid = loom_errors.size() / 2;
  std::cout << name << ": median gradient error loom " << loom_errors[mid] << ", PyTorch "
            << torch_errors[mid] << "; largest loom " << loom_errors.back() << ", PyTorch "
            << torch_errors.back() << "\n";
  EXPECT_LE(loom_errors[mid], std::max(1.1 * torch_errors[mid], 2e-2)) << name;
  EXPECT_LE(loom_errors.back(), std::max(1.1 * torch_errors.back(), 2e-2)) << name;
}

TEST(Autocast, ConvNetMatchesPyTorchAutocast) {
  manual_seed(3);
  nn::models::ConvNet model;
  check_autocast_parity("convnet", *model, 10, randn({16, 1, 28, 28}), 2e-2);
}

TEST(Autocast, ResNet18MatchesPyTorchAutocast) {
  manual_seed(4);
  auto model = nn::models::resnet18(9);
  // Batch 4 at 64x64 leaves layer4's batch norm 16 values per channel: the
  // bfloat16 rounding of its inputs moves the logits by about 3% (PyTorch's
  // autocast by 15%).
  check_autocast_parity("resnet18", *model, 9, randn({4, 3, 64, 64}), 4e-2);
}

TEST(Autocast, GuardNestsAndRestores) {
  EXPECT_FALSE(amp::is_autocast_enabled(kCPU));
  const Tensor m = randn({2, 2});
  {
    amp::AutocastGuard on(kCPU);
    EXPECT_TRUE(amp::is_autocast_enabled(kCPU));
    EXPECT_EQ(amp::get_autocast_dtype(kCPU), kBFloat16);
    EXPECT_EQ(mm(m, m).dtype(), kBFloat16);
    {
      amp::AutocastGuard off(kCPU, std::nullopt, false);
      EXPECT_EQ(mm(m, m).dtype(), kFloat32);
    }
    EXPECT_EQ(mm(m, m).dtype(), kBFloat16);
    EXPECT_FALSE(amp::is_autocast_enabled(kCUDA));
  }
  EXPECT_FALSE(amp::is_autocast_enabled(kCPU));
  EXPECT_EQ(mm(m, m).dtype(), kFloat32);
  EXPECT_LOOM_ERROR(amp::AutocastGuard(kCPU, kFloat16), "bfloat16 only", "float16");
}

TEST(Autocast, WeightCastIsCachedWithinTheRegion) {
  Tensor w = randn({3, 3}).requires_grad_();
  const Tensor x = randn({2, 3});
  Tensor first, second;
  {
    amp::AutocastGuard autocast(kCPU);
    first = linear(x, w);
    second = linear(x, w);
  }
  // One cast node feeds both products: the gradient is summed through it.
  (first.to(kFloat32).sum() + second.to(kFloat32).sum()).backward();
  EXPECT_EQ(w.grad().dtype(), kFloat32);
  const Tensor want = x.sum({0}).unsqueeze(0).expand({3, 3}) * 2;
  EXPECT_TRUE(RelativeErrorAtMost(w.grad(), want, 2e-2));
}

TEST(Autocast, InPlaceAndExplicitDTypesAreLeftAlone) {
  amp::AutocastGuard autocast(kCPU);
  Tensor a = randn({2, 2});
  a.add_(ones({2, 2}));
  EXPECT_EQ(a.dtype(), kFloat32);
  EXPECT_EQ(a.to(kFloat64).dtype(), kFloat64);
  EXPECT_EQ(mm(a.to(kFloat64), a.to(kFloat64)).dtype(), kFloat64);
  EXPECT_EQ(mm(arange(0, 4).view({2, 2}), arange(0, 4).view({2, 2})).dtype(), kInt64);
}

TEST(Autocast, StreamClosuresSeeTheRegion) {
  const Device cpu1("cpu:1");
  const Tensor m = randn({2, 2}, TensorOptions().device(cpu1));
  Tensor out;
  {
    amp::AutocastGuard autocast(kCPU);
    current_stream(cpu1).submit([&] { out = mm(m, m); });
    current_stream(cpu1).synchronize();
  }
  EXPECT_EQ(out.dtype(), kBFloat16);
}

// A closure inherits the region but not its weight-cast cache: after the
// weight changes between two regions (an optimizer step), the second
// region's closure must see the new weight, not the first one's cast.
TEST(Autocast, StreamClosuresDoNotKeepWeightCastsPastTheRegion) {
  const Device cpu1("cpu:1");
  Tensor w = randn({2, 2}, TensorOptions().device(cpu1)).requires_grad_();
  const Tensor x = randn({2, 2}, TensorOptions().device(cpu1));
  const auto step = [&] {
    Tensor out;
    amp::AutocastGuard autocast(kCPU);
    current_stream(cpu1).submit([&] { out = mm(x, w); });
    current_stream(cpu1).synchronize();
    return out.detach().to(kFloat32).cpu();
  };
  const Tensor before = step();
  {
    autograd::NoGradGuard no_grad;
    w.mul_(2);  // exact in bfloat16 too
  }
  const Tensor after = step();
  EXPECT_TRUE(allclose(after, before * 2, 0, 0));
}

}  // namespace
}  // namespace loom
