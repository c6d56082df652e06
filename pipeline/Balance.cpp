#include "pipeline/Balance.h"

#include <chrono>
#include <cmath>
#include <limits>

#include "autograd/GradMode.h"
#include "tensor/CudaRuntime.h"
#include "tensor/Error.h"

namespace loom {
namespace pipeline {

std::vector<int64_t> partition_costs(const std::vector<double>& costs, int64_t num_stages) {
  const int64_t n = static_cast<int64_t>(costs.size());
  LOOM_CHECK(num_stages >= 1, "partition_costs: num_stages must be >= 1, got ", num_stages);
  LOOM_CHECK(n >= num_stages, "partition_costs: ", n, " layers cannot fill ", num_stages,
             " stages (every stage needs at least one layer)");
  std::vector<double> prefix(n + 1, 0.0);
  for (int64_t i = 0; i < n; ++i) {
    LOOM_CHECK(std::isfinite(costs[i]) && costs[i] >= 0, "partition_costs: cost of layer ", i,
               " must be finite and >= 0, got ", costs[i]);
    prefix[i + 1] = prefix[i] + costs[i];
  }
  const double inf = std::numeric_limits<double>::infinity();
  // best[k][j]: smallest max-stage cost of layers [0, j) in k stages;
  // cut[k][j]: where the last of those k stages starts.
  std::vector<std::vector<double>> best(num_stages + 1, std::vector<double>(n + 1, inf));
  std::vector<std::vector<int64_t>> cut(num_stages + 1, std::vector<int64_t>(n + 1, 0));
  best[0][0] = 0.0;
  for (int64_t k = 1; k <= num_stages; ++k)
    for (int64_t j = k; j <= n; ++j)
      for (int64_t i = k - 1; i < j; ++i) {
        const double c = std::max(best[k - 1][i], prefix[j] - prefix[i]);
        if (c < best[k][j]) {
          best[k][j] = c;
          cut[k][j] = i;
        }
      }
  std::vector<int64_t> sizes(num_stages);
  int64_t j = n;
  for (int64_t k = num_stages; k >= 1; --k) {
    sizes[k - 1] = j - cut[k][j];
    j = cut[k][j];
  }
  return sizes;
}

namespace {

// Runs fn(layer_index, layer, input) -> output over the layers, on each
// layer's device, without autograd and in eval mode.
template <typename Fn>
void walk_layers(const nn::Sequential& sequential, const Tensor& sample, const char* who, Fn fn) {
  LOOM_CHECK(!sequential.is_empty() && sequential->size() > 0, who,
             ": the Sequential has no layers");
  LOOM_CHECK(sample.defined(), who, ": the sample is undefined");
  NoGradGuard no_grad;
  Tensor x = sample;
  for (size_t i = 0; i < sequential->size(); ++i) {
    auto layer = (*sequential)[static_cast<int64_t>(i)];
    const bool was_training = layer->is_training();
    layer->train(false);
    try {
      std::vector<Tensor> tensors = layer->parameters();
      for (const Tensor& b : layer->buffers()) tensors.push_back(b);
      for (const Tensor& t : tensors)
        if (t.defined()) {
          x = x.to(t.device());
          break;
        }
      x = fn(i, *layer, x);
    } catch (...) {
      layer->train(was_training);
      throw;
    }
    layer->train(was_training);
  }
}

// Waits until t's CUDA device has finished its queued work (nothing for
// other devices, whose kernels run on the calling thread).
void wait_for_device(const Tensor& t) {
  if (t.defined() && t.is_cuda()) cuda::synchronize(t.device().index);
}

}  // namespace

std::vector<double> profile_times(const nn::Sequential& sequential, const Tensor& sample,
                                  int repeats) {
  LOOM_CHECK(repeats >= 1, "profile_times: repeats must be >= 1, got ", repeats);
  std::vector<double> times;
  walk_layers(sequential, sample, "profile_times", [&](size_t, nn::Module& layer, Tensor x) {
    Tensor y = layer.forward(x);  // warm-up (allocations, lazy init)
    double best = std::numeric_limits<double>::infinity();
    for (int r = 0; r < repeats; ++r) {
      // On a GPU the layer only queues kernels: time the work, not the
      // launches (the device is drained before and after, as torchgpipe's
      // balance_by_time does).
      wait_for_device(x);
      const auto start = std::chrono::steady_clock::now();
      y = layer.forward(x);
      wait_for_device(y);
      const std::chrono::duration<double> d = std::chrono::steady_clock::now() - start;
      best = std::min(best, d.count());
    }
    times.push_back(best);
    return y;
  });
  return times;
}

std::vector<double> profile_sizes(const nn::Sequential& sequential, const Tensor& sample,
                                  double param_scale) {
  LOOM_CHECK(param_scale >= 0, "profile_sizes: param_scale must be >= 0, got ", param_scale);
  std::vector<double> sizes;
  walk_layers(sequential, sample, "profile_sizes", [&](size_t, nn::Module& layer, Tensor x) {
    Tensor y = layer.forward(x);
    double params = 0;
    for (const Tensor& p : layer.parameters())
      if (p.defined()) params += static_cast<double>(p.numel() * p.element_size());
    sizes.push_back(param_scale * params + static_cast<double>(y.numel() * y.element_size()));
    return y;
  });
  return sizes;
}

std::vector<int64_t> balance_by_time(const nn::Sequential& sequential, const Tensor& sample,
                                     int64_t num_stages) {
  return partition_costs(profile_times(sequential, sample), num_stages);
}

std::vector<int64_t> balance_by_size(const nn::Sequential& sequential, const Tensor& sample,
                                     int64_t num_stages, double param_scale) {
  return partition_costs(profile_sizes(sequential, sample, param_scale), num_stages);
}

}  // namespace pipeline
}  // namespace loom
