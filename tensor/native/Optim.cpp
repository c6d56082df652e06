#include "tensor/native/Optim.h"

#include <string>

#include "tensor/native/Copy.h"

namespace loom {
namespace native {

DispatchStub<SgdStepKernel> sgd_step_stub("SGD step");
DispatchStub<AdamStepKernel> adam_step_stub("Adam step");

namespace {

void check_param(const Tensor& p, const Tensor& grad, const char* who) {
  LOOM_CHECK(p.defined(), who, ": undefined parameter");
  LOOM_CHECK(grad.defined(), who, ": parameter ", p.describe(), " has an undefined gradient");
  LOOM_CHECK(p.is_contiguous(), who, ": parameters must be contiguous, got ", p.describe());
  LOOM_CHECK(grad.sizes() == p.sizes(), who, ": gradient ", grad.describe(),
             " does not match its parameter ", p.describe());
  LOOM_CHECK(grad.device() == p.device(), who, ": gradient on ", grad.device(),
             " but parameter on ", p.device());
  LOOM_CHECK(p.is_floating_point(), who, ": expected a floating-point parameter, got ",
             p.describe());
  check_kernel_device(who, p);
}

// Throws unless the state buffer t matches its parameter p.
void check_state(const Tensor& p, const Tensor& t, const char* name, const char* who) {
  LOOM_CHECK(t.defined() && t.sizes() == p.sizes() && t.dtype() == p.dtype() &&
                 t.device() == p.device() && t.is_contiguous(),
             who, ": state '", name, "' ", t.defined() ? t.describe() : std::string("undefined"),
             " does not match its parameter ", p.describe());
}

// The gradient as a contiguous tensor of the parameter's dtype.
Tensor dense_grad(const Tensor& p, const Tensor& grad) {
  return contiguous(to(grad, p.device(), p.dtype()));
}

// The items grouped by (device, dtype) of their parameter, in first-seen order.
template <typename Item>
std::vector<std::vector<Item>> group_by_device(std::vector<Item> items) {
  std::vector<std::vector<Item>> groups;
  for (Item& item : items) {
    const Tensor& p = item.param;
    bool placed = false;
    for (auto& g : groups) {
      const Tensor& q = g.front().param;
      if (q.device() == p.device() && q.dtype() == p.dtype()) {
        g.push_back(std::move(item));
        placed = true;
        break;
      }
    }
    if (!placed) groups.push_back({std::move(item)});
  }
  return groups;
}

}  // namespace

void sgd_update_many(const std::vector<SGDParam>& params, const SGDHyper& h) {
  const bool use_mom = h.momentum != 0;
  std::vector<SGDParam> checked;
  for (const SGDParam& s : params) {
    check_param(s.param, s.grad, "SGD");
    if (use_mom) check_state(s.param, s.momentum_buffer, "momentum_buffer", "SGD");
    checked.push_back({s.param, dense_grad(s.param, s.grad), use_mom ? s.momentum_buffer : Tensor(),
                       s.first});
  }
  for (const auto& group : group_by_device(std::move(checked))) {
    if (is_reduced_float(group.front().param.dtype())) {
      // 16-bit parameters: the step runs on float32 copies of the parameter,
      // gradient and state, each rounded back once.
      std::vector<SGDParam> wide;
      for (const SGDParam& s : group)
        wide.push_back({widen(s.param), widen(s.grad), widen(s.momentum_buffer), s.first});
      sgd_step_stub(group.front().param.device(), wide, h);
      for (size_t i = 0; i < group.size(); ++i) {
        copy_(group[i].param, wide[i].param);
        if (use_mom) copy_(group[i].momentum_buffer, wide[i].momentum_buffer);
      }
      continue;
    }
    sgd_step_stub(group.front().param.device(), group, h);
    for (const SGDParam& s : group) {
      s.param.bump_version();
      if (use_mom) s.momentum_buffer.bump_version();
    }
  }
}

void adam_update_many(const std::vector<AdamParam>& params, const AdamHyper& h) {
  const char* who = h.decoupled ? "AdamW" : "Adam";
  std::vector<AdamParam> checked;
  for (const AdamParam& s : params) {
    check_param(s.param, s.grad, who);
    check_state(s.param, s.exp_avg, "exp_avg", who);
    check_state(s.param, s.exp_avg_sq, "exp_avg_sq", who);
    if (h.amsgrad) check_state(s.param, s.max_exp_avg_sq, "max_exp_avg_sq", who);
    checked.push_back({s.param, dense_grad(s.param, s.grad), s.exp_avg, s.exp_avg_sq,
                       h.amsgrad ? s.max_exp_avg_sq : Tensor(), s.step});
  }
  for (const auto& group : group_by_device(std::move(checked))) {
    if (is_reduced_float(group.front().param.dtype())) {
      std::vector<AdamParam> wide;
      for (const AdamParam& s : group)
        wide.push_back({widen(s.param), widen(s.grad), widen(s.exp_avg), widen(s.exp_avg_sq),
                        widen(s.max_exp_avg_sq), s.step});
      adam_step_stub(group.front().param.device(), wide, h);
      for (size_t i = 0; i < group.size(); ++i) {
        copy_(group[i].param, wide[i].param);
        copy_(group[i].exp_avg, wide[i].exp_avg);
        copy_(group[i].exp_avg_sq, wide[i].exp_avg_sq);
        if (h.amsgrad) copy_(group[i].max_exp_avg_sq, wide[i].max_exp_avg_sq);
      }
      continue;
    }
    adam_step_stub(group.front().param.device(), group, h);
    for (const AdamParam& s : group) {
      s.param.bump_version();
      s.exp_avg.bump_version();
      s.exp_avg_sq.bump_version();
      if (h.amsgrad) s.max_exp_avg_sq.bump_version();
    }
  }
}

void sgd_update(const Tensor& p, const Tensor& grad, const Tensor& buf, bool first,
                const SGDHyper& h) {
  sgd_update_many({{p, grad, buf, first}}, h);
}

void adam_update(const Tensor& p, const Tensor& grad, const Tensor& exp_avg,
                 const Tensor& exp_avg_sq, const Tensor& max_exp_avg_sq, const AdamHyper& h) {
  adam_update_many({{p, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, h.step}}, h);
}

}  // namespace native
}  // namespace loom
