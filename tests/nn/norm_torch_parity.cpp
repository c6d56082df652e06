// Parity of layer_norm and group_norm with PyTorch 1.13: the same inputs,
// weights and output gradient give the same output and the same gradients
// of input, weight and bias (torch.nn.functional.layer_norm / group_norm,
// tools/pyloom/norm_parity.py), in float64 (error <= 1e-10 relative to
// max(1, largest expected magnitude)) and float32 (<= 1e-5).  The module cases load loom's
// nn::LayerNorm / nn::GroupNorm state_dict into torch.nn.LayerNorm / GroupNorm strictly, so
// parameter names and shapes must match too.
#include <fstream>
#include <map>
#include <sstream>

#include "tests/PythonRef.h"

namespace loom {
namespace {

using testing::relative_error;

struct Case {
  std::string name;
  std::string op;            // "layer_norm" or "group_norm"
  IntList shape;             // input
  IntList normalized_shape;  // layer_norm
  int64_t num_groups = 0;    // group_norm
  bool weight = true, bias = true;
  double eps = 1e-5;
  bool module = false;  // through nn::LayerNorm / nn::GroupNorm
  DType dtype = kFloat64;
};

struct Result {
  Tensor out, dx, dweight, dbias;
};

Result run_loom(const Case& c, const Tensor& x0, const Tensor& w0, const Tensor& b0,
                const Tensor& dy) {
  Tensor x = x0.clone().requires_grad_();
  Tensor out, w, b;
  if (c.module) {
    std::shared_ptr<nn::Module> m;
    if (c.op == "layer_norm") {
      nn::LayerNorm ln(
          nn::LayerNormOptions(c.normalized_shape).eps(c.eps).elementwise_affine(c.weight));
      m = ln.ptr();
    } else {
      nn::GroupNorm gn(nn::GroupNormOptions(c.num_groups, c.shape[1]).eps(c.eps).affine(c.weight));
      m = gn.ptr();
    }
    m->to(c.dtype);
    if (c.weight) {
      nn::StateDict state;
      state.insert("weight", w0);
      state.insert("bias", b0);
      m->load_state_dict(state, true);
      w = m->named_parameters().at("weight");
      b = m->named_parameters().at("bias");
    }
    out = m->forward(x);
  } else {
    if (c.weight) w = w0.clone().requires_grad_();
    if (c.bias) b = b0.clone().requires_grad_();
    out = c.op == "layer_norm" ? layer_norm(x, c.normalized_shape, w, b, c.eps)
                               : group_norm(x, c.num_groups, w, b, c.eps);
  }
  out.backward(dy);
  return {out, x.grad(), w.defined() ? w.grad() : Tensor(), b.defined() ? b.grad() : Tensor()};
}

std::string json_list(const IntList& v) {
  std::ostringstream out;
  out << "[";
  for (size_t i = 0; i < v.size(); ++i) out << (i ? ", " : "") << v[i];
  return out.str() + "]";
}

void check_parity(const std::vector<Case>& cases) {
  const std::string dir = testing::make_temp_dir();
  nn::StateDict in;
  std::map<std::string, Result> ours;
  std::ostringstream spec;
  spec << "{";
  Generator gen(123);
  for (size_t k = 0; k < cases.size(); ++k) {
    const Case& c = cases[k];
    const IntList pshape = c.op == "layer_norm" ? c.normalized_shape : IntList{c.shape[1]};
    // Inputs with a mean well away from 0, so the statistics matter.
    const Tensor x = (rand(c.shape, kFloat64, &gen) * 4.0 + 1.5).to(c.dtype);
    const Tensor dy = (rand(c.shape, kFloat64, &gen) * 2.0 - 1.0).to(c.dtype);
    const Tensor w = c.weight ? (rand(pshape, kFloat64, &gen) * 2.0 - 0.5).to(c.dtype) : Tensor();
    const Tensor b = c.bias ? (rand(pshape, kFloat64, &gen) * 2.0 - 1.0).to(c.dtype) : Tensor();
    in.insert(c.name + ".x", x);
    in.insert(c.name + ".dy", dy);
    if (w.defined()) in.insert(c.name + ".weight", w);
    if (b.defined()) in.insert(c.name + ".bias", b);
    ours[c.name] = run_loom(c, x, w, b, dy);
    spec << (k ? ", " : "") << "\"" << c.name << "\": {\"op\": \"" << c.op
         << "\", \"eps\": " << c.eps << ", \"module\": " << (c.module ? "true" : "false");
    if (c.op == "layer_norm")
      spec << ", \"normalized_shape\": " << json_list(c.normalized_shape) << "}";
    else
      spec << ", \"num_groups\": " << c.num_groups << "}";
  }
  spec << "}";
  std::ofstream(dir + "/spec.json") << spec.str();
  nn::save(in, dir + "/in.safetensors");

  std::string output;
  const int rc = testing::run_python(
      "norm_parity.py", dir + "/spec.json " + dir + "/in.safetensors " + dir + "/out.safetensors",
      output);
  ASSERT_EQ(rc, 0) << "PyTorch reference failed (is python3-torch installed? tools/setup.sh "
                      "installs it):\n"
                   << output;
  const nn::StateDict ref = nn::load(dir + "/out.safetensors");
  for (const Case& c : cases) {
    const double tol = c.dtype == kFloat64 ? 1e-10 : 1e-5;
    const Result& r = ours.at(c.name);
    // Errors relative to max(1, max |expected|): dx and dw are 0 up to
    // rounding noise for rows of one value, and noise against noise means nothing.
    EXPECT_LE(relative_error(r.out, ref.at(c.name + ".out"), 1.0), tol) << c.name << " output";
    EXPECT_LE(relative_error(r.dx, ref.at(c.name + ".dx"), 1.0), tol) << c.name << " grad of input";
    if (c.weight) {
      ASSERT_TRUE(r.dweight.defined()) << c.name;
      EXPECT_EQ(r.dweight.sizes(), ref.at(c.name + ".dweight").sizes()) << c.name;
      EXPECT_LE(relative_error(r.dweight, ref.at(c.name + ".dweight"), 1.0), tol)
          << c.name << " grad of weight";
    }
    if (c.bias) {
      ASSERT_TRUE(r.dbias.defined()) << c.name;
      EXPECT_LE(relative_error(r.dbias, ref.at(c.name + ".dbias"), 1.0), tol)
          << c.name << " grad of bias";
    }
    EXPECT_EQ(ref.contains(c.name + ".dweight"), c.weight) << c.name;
  }
}

std::vector<Case> layer_norm_cases(DType dtype) {
  const std::string t = dtype == kFloat64 ? "f64" : "f32";
  std::vector<Case> cases = {
      {"ln_last_" + t, "layer_norm", {4, 7}, {7}},
      {"ln_two_dims_" + t, "layer_norm", {2, 3, 4, 5}, {4, 5}},
      {"ln_whole_" + t, "layer_norm", {3, 6}, {3, 6}},
      {"ln_one_value_" + t, "layer_norm", {5, 1}, {1}, 0, true, true, 0.5},
      {"ln_long_rows_" + t, "layer_norm", {3, 2000}, {2000}},
      {"ln_many_rows_" + t, "layer_norm", {300, 8}, {8}},
      {"ln_no_affine_" + t, "layer_norm", {4, 6}, {6}, 0, false, false, 1e-3},
      {"ln_weight_only_" + t, "layer_norm", {4, 6}, {6}, 0, true, false},
      {"ln_module_" + t, "layer_norm", {2, 5, 6}, {5, 6}, 0, true, true, 1e-5, true},
      {"ln_module_no_affine_" + t, "layer_norm", {2, 6}, {6}, 0, false, false, 1e-5, true},
  };
  for (Case& c : cases) c.dtype = dtype;
  return cases;
}

std::vector<Case> group_norm_cases(DType dtype) {
  const std::string t = dtype == kFloat64 ? "f64" : "f32";
  std::vector<Case> cases = {
      {"gn_one_group_" + t, "group_norm", {2, 6, 5}, {}, 1},
      {"gn_per_channel_" + t, "group_norm", {2, 6, 3, 3}, {}, 6},
      {"gn_groups_" + t, "group_norm", {3, 8, 4, 4}, {}, 4},
      {"gn_2d_input_" + t, "group_norm", {5, 6}, {}, 3},
      {"gn_5d_input_" + t, "group_norm", {2, 4, 2, 3, 2}, {}, 2},
      {"gn_big_groups_" + t, "group_norm", {2, 4, 32, 32}, {}, 2},
      {"gn_no_affine_" + t, "group_norm", {2, 4, 3}, {}, 2, false, false, 1e-3},
      {"gn_bias_only_" + t, "group_norm", {2, 4, 3}, {}, 2, false, true},
      {"gn_module_" + t, "group_norm", {2, 6, 4, 4}, {}, 3, true, true, 1e-5, true},
      {"gn_module_no_affine_" + t, "group_norm", {2, 6, 4}, {}, 2, false, false, 1e-5, true},
  };
  for (Case& c : cases) c.dtype = dtype;
  return cases;
}

TEST(NormTorchParity, LayerNormFloat64) { check_parity(layer_norm_cases(kFloat64)); }
TEST(NormTorchParity, LayerNormFloat32) { check_parity(layer_norm_cases(kFloat32)); }
TEST(NormTorchParity, GroupNormFloat64) { check_parity(group_norm_cases(kFloat64)); }
TEST(NormTorchParity, GroupNormFloat32) { check_parity(group_norm_cases(kFloat32)); }

}  // namespace
}  // namespace loom
