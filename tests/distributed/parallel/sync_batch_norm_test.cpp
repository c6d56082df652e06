// nn::SyncBatchNorm: with ranks holding uneven shares of a batch (3 and 5
// samples, or none), outputs, input gradients, summed weight gradients and
// running statistics equal plain BatchNorm on the concatenated batch; a
// finite-difference gradient check on one rank; convert_sync_batchnorm.
#include <thread>

#include "distributed/ProcessGroupGloo.h"
#include "distributed/parallel/SyncBatchNorm.h"
#include "distributed/store/HashStore.h"
#include "tests/TestUtil.h"

namespace loom {
namespace {

using distributed::ProcessGroupPtr;
using std::chrono::milliseconds;
using testing::AllClose;

void run_ranks(int size, const std::function<void(ProcessGroupPtr, int)>& fn) {
  auto store = std::make_shared<distributed::HashStore>();
  store->set_timeout(milliseconds(10000));
  distributed::ProcessGroupGlooOptions options;
  options.timeout = milliseconds(5000);
  std::vector<std::string> failures(size);
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r) {
    threads.emplace_back([&, r] {
      try {
        auto pg = std::make_shared<distributed::ProcessGroupGloo>(store, r, size, options);
        fn(pg, r);
      } catch (const std::exception& e) {
        failures[r] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < size; ++r) EXPECT_EQ(failures[r], "") << "rank " << r << " of " << size;
}

TEST(SyncBatchNorm, GradcheckOnOneRank) {
  run_ranks(1, [](ProcessGroupPtr pg, int) {
    Tensor x = testing::random_leaf({3, 2, 2, 2}, 1);
    Tensor w = testing::random_leaf({2}, 2);
    Tensor b = testing::random_leaf({2}, 3);
    EXPECT_TRUE(testing::GradOk(
        [&](const std::vector<Tensor>& in) {
          return nn::sync_batch_norm(in[0], Tensor(), Tensor(), in[1], in[2], 0.1, 1e-5, pg);
        },
        {x, w, b}));
    // 2-d input, no affine.
    Tensor x2 = testing::random_leaf({5, 3}, 4);
    EXPECT_TRUE(testing::GradOk(
        [&](const std::vector<Tensor>& in) {
          return nn::sync_batch_norm(in[0], Tensor(), Tensor(), Tensor(), Tensor(), 0.1, 1e-5, pg);
        },
        {x2}));
  });
}

// Runs BatchNorm on the whole batch and SyncBatchNorm on per-rank slices of
// it (`rows[r]` samples on rank r), and compares everything.
void expect_matches_batch_norm(const std::vector<int64_t>& rows, IntList feature_shape) {
  const int world = static_cast<int>(rows.size());
  int64_t total = 0;
  for (int64_t n : rows) total += n;
  IntList shape{total};
  shape.insert(shape.end(), feature_shape.begin(), feature_shape.end());
  const int64_t c = feature_shape[0];
  Generator gen(17);
  Tensor x = randn(shape, {}, &gen) * 2.0 + 0.5;
  Tensor dy = randn(shape, {}, &gen);
  Tensor weight = rand({c}, {}, &gen) + 0.5, bias = randn({c}, {}, &gen);

  auto make_reference = [&]() -> std::shared_ptr<nn::BatchNormBase> {
    if (shape.size() == 4) return nn::BatchNorm2d(c).ptr();
    return nn::BatchNorm1d(c).ptr();
  };
  auto ref = make_reference();
  {
    autograd::NoGradGuard no_grad;
    ref->weight.copy_(weight);
    ref->bias.copy_(bias);
  }
  Tensor xr = x.clone().requires_grad_();
  Tensor out_ref = ref->forward(xr);
  (out_ref * dy).sum().backward();
  // Twice, so the running statistics see two updates.
  Tensor out_ref2 = ref->forward(x);

  std::vector<Tensor> grad_w(world), grad_b(world);
  std::vector<int64_t> start(world, 0);
  for (int r = 1; r < world; ++r) start[r] = start[r - 1] + rows[r - 1];
  run_ranks(world, [&](ProcessGroupPtr pg, int r) {
    nn::SyncBatchNorm sbn(nn::BatchNormOptions(c), pg);
    {
      autograd::NoGradGuard no_grad;
      sbn->weight.copy_(weight);
      sbn->bias.copy_(bias);
    }
    Tensor xs = x.narrow(0, start[r], rows[r]).clone().requires_grad_();
    Tensor out = sbn(xs);
    EXPECT_TRUE(AllClose(out, out_ref.detach().narrow(0, start[r], rows[r]), 1e-5, 1e-5));
    (out * dy.narrow(0, start[r], rows[r])).sum().backward();
    EXPECT_TRUE(AllClose(xs.grad(), xr.grad().narrow(0, start[r], rows[r]), 1e-4, 1e-5))
        << "rank " << r;
    grad_w[r] = sbn->weight.grad().clone();
    grad_b[r] = sbn->bias.grad().clone();
    sbn(x.narrow(0, start[r], rows[r]));
    EXPECT_TRUE(AllClose(sbn->running_mean, ref->running_mean, 1e-5, 1e-6)) << "rank " << r;
    EXPECT_TRUE(AllClose(sbn->running_var, ref->running_var, 1e-5, 1e-6)) << "rank " << r;
    EXPECT_EQ(sbn->num_batches_tracked.item<int64_t>(), 2);
    // Eval: the running statistics, no communication (only rank 0 calls it).
    if (r == 0) {
      sbn->eval();
      ref->eval();
      EXPECT_TRUE(AllClose(sbn(x), ref->forward(x), 1e-5, 1e-6));
      ref->train();
    }
  });
  // Each rank's weight/bias gradient is its share; together the whole.
  Tensor sum_w = zeros({c}), sum_b = zeros({c});
  for (int r = 0; r < world; ++r) {
    sum_w += grad_w[r];
    sum_b += grad_b[r];
  }
  EXPECT_TRUE(AllClose(sum_w, ref->weight.grad(), 1e-4, 1e-5));
  EXPECT_TRUE(AllClose(sum_b, ref->bias.grad(), 1e-4, 1e-5));
}

TEST(SyncBatchNorm, UnevenBatchesMatchBatchNormOnTheConcatenation) {
  {
    SCOPED_TRACE("(N, C, H, W), 3 + 5 samples");
    expect_matches_batch_norm({3, 5}, {3, 2, 2});
  }
  {
    SCOPED_TRACE("(N, C), 4 + 0 + 5 samples");
    expect_matches_batch_norm({4, 0, 5}, {3});
  }
}

TEST(SyncBatchNorm, WithoutGroupItIsBatchNorm) {
  Generator gen(3);
  Tensor x = randn({4, 2, 3, 3}, {}, &gen);
  nn::SyncBatchNorm sbn(nn::BatchNormOptions(2));
  nn::BatchNorm2d bn(2);
  EXPECT_TRUE(AllClose(sbn(x), bn(x), 1e-6, 1e-7));
  EXPECT_TRUE(AllClose(sbn->running_var, bn->running_var, 1e-6, 1e-7));
}

TEST(SyncBatchNorm, ErrorsNameTheProblem) {
  run_ranks(1, [](ProcessGroupPtr pg, int) {
    nn::SyncBatchNorm sbn(nn::BatchNormOptions(3), pg);
    EXPECT_LOOM_ERROR(sbn(ones({1, 3})), "more than 1 value per channel");
    EXPECT_LOOM_ERROR(sbn(ones({4, 2})), "SyncBatchNorm(3)", "[4, 2]");
  });
}

// A parent calling its BatchNorm through a typed member (as ResNet does).
class NetImpl : public nn::Module {
 public:
  NetImpl() : Module("Net") {
    conv = register_module("conv", nn::Conv2d(nn::Conv2dOptions(1, 2, 3).padding(1)));
    bn = register_module("bn", nn::BatchNorm2d(2));
    head = register_module("head", nn::Sequential(nn::Flatten(), nn::BatchNorm1d(8)));
  }
  Tensor forward(const Tensor& x) override { return head(bn(conv(x))); }
  nn::Conv2d conv{nullptr};
  nn::BatchNorm2d bn{nullptr};
  nn::Sequential head{nullptr};
};

TEST(SyncBatchNorm, ConvertKeepsNamesTensorsAndReachesTypedMembers) {
  Generator gen(6);
  Tensor x = randn({6, 1, 2, 2}, {}, &gen);
  manual_seed(4);
  auto reference = std::make_shared<NetImpl>();
  nn::StateDict init;  // copies: the reference's tensors change below
  for (const auto& [name, t] : reference->state_dict()) init.insert(name, t.detach().clone());
  reference->forward(x);  // the statistics of the whole batch

  run_ranks(2, [&](ProcessGroupPtr pg, int r) {
    auto net = std::make_shared<NetImpl>();
    net->load_state_dict(init);
    const auto names_before = net->state_dict().keys();
    const Tensor bn_weight = net->bn->weight;
    auto converted = nn::convert_sync_batchnorm(std::shared_ptr<nn::Module>(net), pg);
    EXPECT_TRUE(converted == net);
    EXPECT_EQ(net->state_dict().keys(), names_before);
    const auto children = net->named_children();
    EXPECT_EQ(children.at("bn")->type_name(), "SyncBatchNorm");
    auto sync = std::dynamic_pointer_cast<nn::SyncBatchNormImpl>(children.at("bn"));
    ASSERT_NE(sync, nullptr);
    EXPECT_TRUE(sync->weight.is_same(bn_weight));
    EXPECT_TRUE(sync->process_group == pg);
    EXPECT_EQ(net->head->named_children().at("1")->type_name(), "SyncBatchNorm");
    // Half the batch each; the running statistics are those of the whole.
    net->forward(x.narrow(0, 3 * r, 3));
    const auto ref_state = reference->state_dict();
    for (const auto& [name, t] : net->state_dict())
      EXPECT_TRUE(AllClose(t, ref_state.at(name), 1e-5, 1e-6)) << name << " rank " << r;
  });
}

}  // namespace
}  // namespace loom
