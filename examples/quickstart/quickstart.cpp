// quickstart: loom's C++ API in one page.
//
// Fits a linear model y = x . w + b to noisy data by plain gradient descent,
// using tensors, broadcasting views, autograd and NoGradGuard, and prints the
// loss as it falls.  Only elementwise ops, sum and views are used, so it reads
// like the maths:  loss = sum((x w + b - y)^2) / N.
#include <cstdio>
#include <vector>

#include "loom.h"

using namespace loom;

namespace {

// "[a, b, c]" for a small tensor.
std::string values(const Tensor& t) {
  std::string s = "[";
  for (float v : t.to_vector<float>()) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%s%.3f", s.size() > 1 ? ", " : "", v);
    s += buf;
  }
  return s + "]";
}

// x (N, D) times w (D,) summed over D, plus b (1,): the predictions (N,).
Tensor predict(const Tensor& x, const Tensor& w, const Tensor& b) {
  const int64_t n = x.size(0), d = x.size(1);
  Tensor xw = x * w.reshape({1, d}).expand({n, d});  // (N, D), w broadcast over rows
  return xw.sum({1}) + b.expand({n});                // (N,)
}

}  // namespace

int main() {
  const int64_t n = 256, d = 3;
  Generator gen(42);  // seeded: the same run every time

  // Data: y = 2 x0 - 3 x1 + 0.5 x2 + 1, plus a little noise.
  Tensor x = randn({n, d}, kFloat32, &gen);                  // (N, D)
  Tensor true_w = tensor<float>({2.0f, -3.0f, 0.5f});        // (D,)
  Tensor true_b = tensor<float>({1.0f});                     // (1,)
  Tensor y = predict(x, true_w, true_b) + randn({n}, kFloat32, &gen) * 0.1;  // (N,)

  // Parameters: leaves that require gradients.
  Tensor w = zeros({d}).requires_grad_();  // (D,)
  Tensor b = zeros({1}).requires_grad_();  // (1,)

  const double lr = 0.1;
  std::printf("fitting y = x.w + b on %lld points\n", static_cast<long long>(n));
  for (int step = 0; step <= 60; ++step) {
    Tensor err = predict(x, w, b) - y;                        // (N,)
    Tensor loss = (err * err).sum() / static_cast<double>(n);  // () mean squared error
    loss.backward();  // fills w.grad() and b.grad()
    {
      NoGradGuard no_grad;  // the update itself is not part of the graph
      w.sub_(w.grad() * lr);
      b.sub_(b.grad() * lr);
    }
    w.set_grad(Tensor());  // gradients accumulate: clear them for the next step
    b.set_grad(Tensor());
    if (step % 10 == 0) std::printf("step %2d  loss %.6f\n", step, loss.item());
  }
  std::printf("learned w = %s (true [2.000, -3.000, 0.500])\n", values(w).c_str());
  std::printf("learned b = %s (true [1.000])\n", values(b).c_str());

  // Every mistake is a loom::Error with a message that says what went wrong.
  try {
    x + zeros({4});  // (N, 3) + (4,) do not broadcast
  } catch (const Error& e) {
    std::printf("loom::Error: %s\n", e.what());
  }
  return 0;
}
