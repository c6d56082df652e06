// Parity with PyTorch 1.13: the same weights (through safetensors) and inputs
// give the same logits, loss, gradients and updated BatchNorm statistics
// (relative error <= 1e-4 in float32).
#include "tests/PythonRef.h"

namespace loom {
namespace {

using testing::RelativeErrorAtMost;

void check_parity(const std::string& name, nn::Module& model, int64_t num_classes, Tensor x) {
  const std::string dir = testing::make_temp_dir();
  Tensor y = randint(0, num_classes, {x.size(0)});
  // What PyTorch gets: the weights before this step, the input and the target.
  nn::StateDict in = model.state_dict();
  nn::StateDict pristine;
  for (const auto& [k, v] : in) pristine.insert(k, v.clone().detach());
  pristine.insert("__input", x);
  pristine.insert("__target", y);
  nn::save(pristine, dir + "/in.safetensors");

  model.train();
  Tensor logits = model.forward(x);
  Tensor loss = cross_entropy(logits, y);
  loss.backward();

  std::string output;
  const int rc = testing::run_python("parity.py", name + " " + std::to_string(num_classes) + " " + dir +
                                         "/in.safetensors " + dir + "/out.safetensors",
                                     output);
  ASSERT_EQ(rc, 0) << "PyTorch reference failed (is python3-torch installed? tools/setup.sh "
                      "installs it):\n"
                   << output;
  const nn::StateDict ref = nn::load(dir + "/out.safetensors");

  EXPECT_TRUE(RelativeErrorAtMost(logits, ref.at("logits"), 1e-4)) << name << " logits";
  EXPECT_TRUE(RelativeErrorAtMost(loss, ref.at("loss"), 1e-4)) << name << " loss";
  // Gradients are compared against their own scale.  A gradient that is zero
  // in exact arithmetic (a convolution bias followed by batch norm) is only
  // rounding noise on both sides: it must be as negligible in loom as in
  // PyTorch, relative to the model's largest gradient.
  double grad_scale = 0;
  for (const auto& [key, t] : ref)
    if (key.rfind("grad.", 0) == 0)
      for (double v : t.to_vector<double>()) grad_scale = std::max(grad_scale, std::abs(v));
  int checked = 0;
  for (const auto& [pname, p] : model.named_parameters()) {
    ASSERT_TRUE(p.grad().defined()) << pname << " has no gradient";
    const Tensor& want = ref.at("grad." + pname);
    ASSERT_EQ(p.grad().sizes(), want.sizes()) << name << " grad of " << pname;
    const double want_max = want.abs().max().item<double>();
    if (want_max < 1e-5 * grad_scale) {
      EXPECT_LT(p.grad().abs().max().item<double>(), 1e-5 * grad_scale)
          << name << " grad of " << pname << " should vanish";
    } else {
      EXPECT_TRUE(RelativeErrorAtMost(p.grad(), want, 1e-4)) << name << " grad of " << pname;
    }
    ++checked;
  }
  for (const auto& [bname, b] : model.named_buffers()) {
    if (!b.is_floating_point()) {
      EXPECT_EQ(b.sizes(), ref.at("buffer." + bname).sizes()) << bname;
      EXPECT_EQ(b.to_vector<int64_t>(), ref.at("buffer." + bname).to_vector<int64_t>()) << bname;
      continue;
    }
    EXPECT_TRUE(RelativeErrorAtMost(b, ref.at("buffer." + bname), 1e-4))
        << name << " buffer " << bname;
  }
  EXPECT_EQ(checked, static_cast<int>(ref.size()) - 2 - static_cast<int>(model.named_buffers().size()));
}

TEST(TorchParity, ConvNet) {
  manual_seed(1);
  nn::models::ConvNet model;
  check_parity("convnet", *model, 10, randn({16, 1, 28, 28}));
}

TEST(TorchParity, ResNet18) {
  manual_seed(2);
  auto model = nn::models::resnet18(9);
  check_parity("resnet18", *model, 9, randn({4, 3, 64, 64}));
}

}  // namespace
}  // namespace loom
