// DDP, SyncBatchNorm and the evaluation helpers on a group that, like nccl,
// takes tensors on one device only (ProcessGroup::device_for).  A CPU stand-in
// makes the check run everywhere: the group below accepts only cpu:1 tensors
// (as nccl accepts only the rank's GPU) and forwards to a gloo group of one.
// Every bookkeeping tensor (replica summaries, unused-parameter counts,
// gathered headers, SyncBatchNorm statistics) must therefore be moved to
// cpu:1 first, which is the code path DDP on CUDA takes.
#include <memory>
#include <vector>

#include "distributed/ProcessGroupGloo.h"
#include "distributed/parallel/DistributedDataParallel.h"
#include "distributed/parallel/Evaluation.h"
#include "distributed/parallel/SyncBatchNorm.h"
#include "distributed/store/HashStore.h"
#include "tests/TestUtil.h"

namespace loom {
namespace distributed {
namespace {

const Device kComm("cpu:1");

class OneDeviceGroup : public ProcessGroup {
 public:
  OneDeviceGroup()
      : ProcessGroup(0, 1, std::chrono::milliseconds(10000)),
        inner_(std::make_shared<ProcessGroupGloo>(std::make_shared<HashStore>(), 0, 1)) {}
  std::string backend() const override { return "one-device"; }
  Device device_for(Device hint) const override { return hint == kComm ? hint : kComm; }
  int collectives = 0;

  WorkPtr all_reduce(Tensor& t, ReduceOp op) override {
    on(t);
    return inner_->all_reduce(t, op);
  }
  WorkPtr broadcast(Tensor& t, int root) override {
    on(t);
    return inner_->broadcast(t, root);
  }
  WorkPtr reduce(Tensor& t, int root, ReduceOp op) override {
    on(t);
    return inner_->reduce(t, root, op);
  }
  WorkPtr all_gather(std::vector<Tensor>& outs, const Tensor& in) override {
    on(in);
    for (auto& o : outs) on(o);
    return inner_->all_gather(outs, in);
  }
  WorkPtr all_gather_into_tensor(Tensor& out, const Tensor& in) override {
    on(in);
    on(out);
    return inner_->all_gather_into_tensor(out, in);
  }
  WorkPtr gather(std::vector<Tensor>& outs, const Tensor& in, int root) override {
    on(in);
    return inner_->gather(outs, in, root);
  }
  WorkPtr scatter(Tensor& out, const std::vector<Tensor>& ins, int root) override {
    on(out);
    return inner_->scatter(out, ins, root);
  }
  WorkPtr reduce_scatter(Tensor& out, const std::vector<Tensor>& ins, ReduceOp op) override {
    on(out);
    return inner_->reduce_scatter(out, ins, op);
  }
  WorkPtr all_to_all(std::vector<Tensor>& outs, const std::vector<Tensor>& ins) override {
    return inner_->all_to_all(outs, ins);
  }
  WorkPtr barrier() override { return inner_->barrier(); }
  WorkPtr send(const Tensor& t, int dst, int tag) override { return inner_->send(t, dst, tag); }
  WorkPtr recv(Tensor& t, int src, int tag) override { return inner_->recv(t, src, tag); }

 private:
  void on(const Tensor& t) {
    ++collectives;
    LOOM_CHECK(t.device() == kComm, "OneDeviceGroup: got a tensor on ", t.device(),
               ", this group takes ", kComm, " only");
  }
  std::shared_ptr<ProcessGroupGloo> inner_;
};

class TwoParamsImpl : public nn::Module {
 public:
  TwoParamsImpl() : nn::Module("TwoParams") {
    w = register_parameter("w", full({6}, 0.5));
    b = register_parameter("b", full({6}, -0.25));
    unused = register_parameter("unused", zeros({2}));
    scale = register_buffer("scale", full({6}, 2.0));
  }
  Tensor forward(const Tensor& x) override { return x * w * scale + b; }
  Tensor w, b, unused, scale;
};

TEST(CommunicationDevice, DdpMovesItsBookkeepingToTheGroupsDevice) {
  auto group = std::make_shared<OneDeviceGroup>();
  auto model = std::make_shared<TwoParamsImpl>();
  model->to(kComm);
  auto reference = std::make_shared<TwoParamsImpl>();
  DDPOptions options;
  options.device_ids = {kComm};
  options.find_unused_parameters = true;  // the unused-parameter counts travel too
  options.first_bucket_cap_mb = 1e-5;
  options.bucket_cap_mb = 1e-5;
  DistributedDataParallel ddp(std::shared_ptr<nn::Module>(model), group, options);
  Tensor x = randn({3, 6});
  Tensor y = randn({3, 6});
  for (int step = 0; step < 2; ++step) {
    ddp->zero_grad();
    reference->zero_grad();
    Tensor d = ddp->forward(x.to(kComm)) - y.to(kComm);
    (d * d).mean().backward();
    Tensor e = reference->forward(x) - y;
    (e * e).mean().backward();
    EXPECT_TRUE(testing::AllClose(model->w.grad().to(Device(kCPU)), reference->w.grad()));
    EXPECT_TRUE(testing::AllClose(model->b.grad().to(Device(kCPU)), reference->b.grad()));
    EXPECT_FALSE(model->unused.grad().defined());
  }
  EXPECT_GT(group->collectives, 5);
}

TEST(CommunicationDevice, BroadcastCoalescedStagesTensorsOfAnyDevice) {
  auto group = std::make_shared<OneDeviceGroup>();
  Tensor a = full({3}, 1.5);                  // cpu: staged through cpu:1
  Tensor b = full({2}, 4.0, kInt64);
  Tensor c = full({2, 2}, 3.0).to(kComm);     // already there
  broadcast_coalesced({a, b, c}, group, 0);
  EXPECT_TRUE(testing::AllClose(a, full({3}, 1.5)));
  EXPECT_EQ(b.to_vector<int64_t>(), (std::vector<int64_t>{4, 4}));
  EXPECT_EQ(c.device(), kComm);
}

TEST(CommunicationDevice, EvaluationHelpersReturnToTheInputsDevice) {
  auto group = std::make_shared<OneDeviceGroup>();
  Tensor rows = arange(6).to(kFloat32).view({3, 2});
  Tensor all = all_gather_concat(rows, group);
  EXPECT_EQ(all.device(), Device(kCPU));
  EXPECT_TRUE(testing::AllClose(all, rows));
  EXPECT_DOUBLE_EQ(all_reduce_mean(2.5, group), 2.5);
}

TEST(CommunicationDevice, SyncBatchNormExchangesStatisticsOnTheGroupsDevice) {
  auto group = std::make_shared<OneDeviceGroup>();
  auto local = std::make_shared<ProcessGroupGloo>(std::make_shared<HashStore>(), 0, 1);
  Tensor x = randn({4, 3, 5});
  Tensor g = randn({4, 3, 5});
  Tensor x1 = x.clone().requires_grad_(true);
  Tensor out1 = nn::sync_batch_norm(x1, Tensor(), Tensor(), Tensor(), Tensor(), 0.1, 1e-5, local);
  (out1 * g).sum().backward();
  Tensor x2 = x.clone().requires_grad_(true);  // on cpu: statistics go through cpu:1
  Tensor out2 = nn::sync_batch_norm(x2, Tensor(), Tensor(), Tensor(), Tensor(), 0.1, 1e-5, group);
  (out2 * g).sum().backward();
  EXPECT_TRUE(testing::AllClose(out2, out1));
  EXPECT_TRUE(testing::AllClose(x2.grad(), x1.grad()));
}

}  // namespace
}  // namespace distributed
}  // namespace loom
