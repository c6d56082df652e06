#include <sstream>

#include "tests/TestUtil.h"

namespace loom {
namespace {

using testing::AllClose;

// A user module declared the libtorch way.
struct NetImpl : nn::Cloneable<NetImpl> {
  NetImpl() : Cloneable("Net") { reset(); }
  void reset() override {
    fc1 = register_module("fc1", nn::Linear(4, 8));
    fc2 = register_module("fc2", nn::Linear(8, 2));
    scale = register_parameter("scale", ones({1}));
    register_buffer("steps", zeros({}, kInt64));
  }
  Tensor forward(const Tensor& x) override { return fc2(relu(fc1(x))) * scale; }
  nn::Linear fc1{nullptr}, fc2{nullptr};
  Tensor scale;
};
LOOM_MODULE(Net);

std::vector<std::string> keys(const nn::OrderedDict<Tensor>& d) { return d.keys(); }

TEST(Module, RegistersNamedParametersBuffersChildren) {
  Net net;
  EXPECT_EQ(keys(net->named_parameters()),
            (std::vector<std::string>{"scale", "fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"}));
  EXPECT_EQ(keys(net->named_parameters(false)), (std::vector<std::string>{"scale"}));
  EXPECT_EQ(keys(net->named_buffers()), (std::vector<std::string>{"steps"}));
  EXPECT_EQ(net->children().size(), 2u);
  EXPECT_EQ(net->modules().size(), 3u);
  EXPECT_EQ(keys(net->state_dict()),
            (std::vector<std::string>{"scale", "steps", "fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"}));
  for (const Tensor& p : net->parameters()) EXPECT_TRUE(p.requires_grad() && p.is_leaf());
  EXPECT_EQ(net->fc1->weight.sizes(), (IntList{8, 4}));
  // The holder calls forward.
  EXPECT_EQ(net(randn({3, 4})).sizes(), (IntList{3, 2}));
}

TEST(Module, TrainEvalRecurse) {
  Net net;
  net->eval();
  EXPECT_FALSE(net->is_training());
  EXPECT_FALSE(net->fc1->is_training());
  net->train();
  EXPECT_TRUE(net->fc2->is_training());
}

TEST(Module, ToDeviceKeepsHandlesValid) {
  Net net;
  Tensor w = net->fc1->weight;
  const auto before = w.to_vector<float>();
  net->to(Device("cpu:1"));
  EXPECT_EQ(w.device(), Device("cpu:1"));
  EXPECT_EQ(net->fc1->weight.device(), Device("cpu:1"));
  EXPECT_EQ(w.to_vector<float>(), before);
  net->to(kFloat64);
  EXPECT_EQ(w.dtype(), kFloat64);
  EXPECT_EQ(net->named_buffers().at("steps").dtype(), kInt64);  // integer buffers stay
  Tensor y = net(randn({2, 4}, TensorOptions(kFloat64).device(Device("cpu:1"))));
  EXPECT_EQ(y.device(), Device("cpu:1"));
}

TEST(Module, ZeroGradAndApply) {
  Net net;
  net(randn({2, 4})).sum().backward();
  EXPECT_TRUE(net->fc1->weight.grad().defined());
  net->zero_grad(false);
  EXPECT_TRUE(AllClose(net->fc1->weight.grad(), zeros({8, 4})));
  net->zero_grad();
  EXPECT_FALSE(net->fc1->weight.grad().defined());
  int count = 0;
  net->apply([&](nn::Module&) { ++count; });
  EXPECT_EQ(count, 3);
}

TEST(Module, CloneIsDeep) {
  Net net;
  auto copy = std::dynamic_pointer_cast<NetImpl>(net->clone());
  ASSERT_TRUE(copy);
  EXPECT_TRUE(AllClose(copy->fc1->weight, net->fc1->weight));
  EXPECT_FALSE(copy->fc1->weight.storage().is_alias_of(net->fc1->weight.storage()));
  {
    NoGradGuard no_grad;
    copy->fc1->weight.mul_(0.0f);
  }
  EXPECT_FALSE(AllClose(copy->fc1->weight, net->fc1->weight));
}

TEST(Module, LoadStateDictListsEveryMismatch) {
  Net net;
  auto state = net->state_dict();
  state.erase("fc1.bias");
  state.insert("extra.weight", zeros({1}));
  state.insert("fc2.weight", zeros({3, 3}));
  try {
    net->load_state_dict(state);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_THAT(msg, ::testing::HasSubstr("Missing key(s) in state_dict: \"fc1.bias\""));
    EXPECT_THAT(msg, ::testing::HasSubstr("Unexpected key(s) in state_dict: \"extra.weight\""));
    EXPECT_THAT(msg, ::testing::HasSubstr("size mismatch for fc2.weight"));
    EXPECT_THAT(msg, ::testing::HasSubstr("[3, 3]"));
    EXPECT_THAT(msg, ::testing::HasSubstr("[2, 8]"));
  }
  // Non-strict ignores missing/unexpected keys but never a shape mismatch.
  state.insert("fc2.weight", zeros({2, 8}));
  net->load_state_dict(state, false);
  EXPECT_TRUE(AllClose(net->fc2->weight, zeros({2, 8})));
}

TEST(Module, PrintsTheTree) {
  nn::models::ConvNet net;
  std::ostringstream out;
  out << *net;
  const std::string s = out.str();
  EXPECT_THAT(s, ::testing::HasSubstr("ConvNet(\n  (layer1): Sequential(\n    (0): Conv2d(1, 16, kernel_size=[5, 5], stride=[1, 1], padding=[2, 2])"));
  EXPECT_THAT(s, ::testing::HasSubstr("(fc): Linear(in_features=1568, out_features=10, bias=true)"));
}

TEST(Sequential, IndexSliceAndErrors) {
  nn::Sequential seq(nn::Linear(4, 3), nn::ReLU(), nn::Linear(3, 2));
  EXPECT_EQ(seq->size(), 3u);
  EXPECT_EQ(seq[-1]->type_name(), "Linear");
  EXPECT_EQ(seq->at<nn::LinearImpl>(0)->options.out_features_, 3);
  auto tail = seq->slice(1, 3);
  EXPECT_EQ(tail->size(), 2u);
  EXPECT_EQ(keys(tail->named_parameters()), (std::vector<std::string>{"2.weight", "2.bias"}));
  Tensor x = randn({5, 4});
  EXPECT_TRUE(AllClose(seq(x), tail->forward(seq[0]->forward(x))));
  EXPECT_LOOM_ERROR(seq[3], "index 3 is out of range for 3 modules");
  EXPECT_LOOM_ERROR(seq(randn({5, 7})), "child (0) Linear", "expected input of shape (..., 4)",
                    "[5, 7]");
}

TEST(Containers, ModuleListAndDict) {
  nn::ModuleList list(nn::Linear(2, 2), nn::Linear(2, 3));
  EXPECT_EQ(keys(list->named_parameters())[2], "1.weight");
  nn::ModuleDict dict;
  dict->insert("enc", nn::Linear(2, 2).ptr());
  EXPECT_TRUE(dict->contains("enc"));
  EXPECT_LOOM_ERROR((*dict)["dec"], "no module named \"dec\"");
}

TEST(Layers, WrongInputShapesNameTheLayer) {
  nn::Conv2d conv(nn::Conv2dOptions(3, 8, 3));
  EXPECT_LOOM_ERROR(conv(randn({2, 4, 8, 8})), "Conv2d(3, 8)", "(N, 3, H, W)", "[2, 4, 8, 8]");
  nn::BatchNorm2d bn(8);
  EXPECT_LOOM_ERROR(bn(randn({2, 4, 8, 8})), "BatchNorm2d(8)", "[2, 4, 8, 8]");
  nn::models::ConvNet net;
  EXPECT_LOOM_ERROR(net(randn({2, 1, 32, 32})), "ConvNet", "(N, 1, 28, 28)");
}

TEST(Layers, BatchNormTracksRunningStats) {
  nn::BatchNorm2d bn(2);
  Tensor x = randn({4, 2, 3, 3}) * 2.0f + 1.0f;
  bn(x);
  EXPECT_EQ(bn->num_batches_tracked.item<int64_t>(), 1);
  const Tensor batch_mean = x.mean({0, 2, 3});
  EXPECT_TRUE(AllClose(bn->running_mean, batch_mean * 0.1f, 1e-5, 1e-6));
  bn->eval();
  bn(x);
  EXPECT_EQ(bn->num_batches_tracked.item<int64_t>(), 1);
}

TEST(Init, DefaultInitBoundsLikePyTorch) {
  manual_seed(0);
  nn::Linear fc(100, 50);
  const double bound = 1.0 / std::sqrt(100.0);
  for (float v : fc->weight.to_vector<float>()) EXPECT_LE(std::abs(v), bound + 1e-7);
  for (float v : fc->bias.to_vector<float>()) EXPECT_LE(std::abs(v), bound + 1e-7);
  Tensor w = empty({256, 128});
  nn::init::kaiming_normal_(w, 0, nn::init::FanMode::kFanOut, nn::init::Nonlinearity::kReLU);
  EXPECT_NEAR(w.std().item<float>(), std::sqrt(2.0 / 256.0), 0.005);
  EXPECT_LOOM_ERROR(nn::init::xavier_uniform_(w = zeros({3})), "fewer than 2 dimensions");
}

TEST(Zoo, ParameterNamesMatchTorchvision) {
  nn::models::ConvNet convnet;
  const auto c = convnet->state_dict();
  EXPECT_TRUE(c.contains("layer1.0.weight"));
  EXPECT_TRUE(c.contains("layer1.1.running_mean"));
  EXPECT_TRUE(c.contains("layer2.1.num_batches_tracked"));
  EXPECT_TRUE(c.contains("fc.bias"));
  auto r18 = nn::models::resnet18(9);
  const auto r = r18->state_dict();
  EXPECT_TRUE(r.contains("layer1.1.bn2.running_var"));
  EXPECT_TRUE(r.contains("layer2.0.downsample.0.weight"));
  EXPECT_TRUE(r.contains("layer2.0.downsample.1.running_mean"));
  EXPECT_EQ(r.at("fc.weight").sizes(), (IntList{9, 512}));
  EXPECT_EQ(r18->parameters().size(), 62u);  // as torchvision's resnet18
  auto r50 = nn::models::resnet50();
  EXPECT_EQ(r50->parameters().size(), 161u);
  int64_t n = 0;
  for (const Tensor& p : r50->parameters()) n += p.numel();
  EXPECT_EQ(n, 25557032);  // torchvision resnet50: 25,557,032 parameters
  EXPECT_EQ(r50->named_parameters().at("layer3.0.conv2.weight").sizes(), (IntList{256, 256, 3, 3}));
}

}  // namespace
}  // namespace loom
