// oneDNN convolutions on loom's NCHW buffers; see OneDnnConvolution.h.
//
// Each (pass, dtype, geometry, thread count) gets one primitive, created on
// first use and kept: creating a primitive descriptor walks oneDNN's kernel
// list and costs far more than a small convolution.  The primitive picks its
// own memory layouts (blocked, e.g. nChw8c on AVX2); loom's NCHW buffers are
// reordered into them before the pass and the outputs back after it.
// Channels-last (NHWC) activations go to the kernels as they are (its
// brgconv and jit kernels read NHWC; only the weights are reordered), or
// through reorders into the blocked layouts, or (1x1 convolutions) to its
// matrix product, whichever was timed fastest (WayChoices below); a float32
// 3x3 stride-1 pass in either layout may also take oneDNN's Winograd kernels
// (through the blocked layouts), timed with the rest.  With
// the plain nchw layouts oneDNN falls back to im2col + its sgemm, which is
// what loom's own kernels already do (//bench:conv_backends).
#include "tensor/cpu/OneDnnConvolution.h"

#include <cstdlib>
#include <functional>
#include <memory>
#include <unordered_map>
#include <utility>
#include <vector>

#include <dnnl.hpp>

#include "tensor/Error.h"
#include "tensor/Factory.h"
#include "tensor/Parallel.h"
#include "tensor/WeightReuse.h"
#include "tensor/cpu/KeptWeightCopies.h"
#include "tensor/cpu/OmpThreads.h"
#include "tensor/cpu/OneDnnEngine.h"
#include "tensor/cpu/TimedChoice.h"

namespace loom {
namespace cpu {
namespace onednn {
namespace {

using tag = dnnl::memory::format_tag;
using dims = dnnl::memory::dims;

// The setting in environment variable `name`: "auto" when unset or empty,
// else "auto" or one of `values` (anything else is a loom::Error).
std::string read_setting(const char* name, const std::vector<std::string>& values) {
  const char* env = std::getenv(name);
  const std::string v = env == nullptr || *env == '\0' ? "auto" : env;
  std::string expected = "\"auto\"";
  bool known = v == "auto";
  for (size_t i = 0; i < values.size(); ++i) {
    expected += (i + 1 == values.size() ? " or \"" : ", \"") + values[i] + "\"";
    known = known || v == values[i];
  }
  LOOM_CHECK(known, name, ": expected ", expected, ", got \"", v, "\"");
  return v;
}

dnnl::memory::data_type data_type(DType d) {
  return d == kBFloat16 ? dnnl::memory::data_type::bf16 : dnnl::memory::data_type::f32;
}

struct Descs {
  dnnl::memory::desc src, weights, bias, dst;
  dims strides, dilates, pad_l, pad_r;
};

Descs descs(const ConvGeometry& g, DType dtype) {
  const auto dt = data_type(dtype);
  Descs d;
  const tag activations = g.channels_last ? tag::nhwc : tag::nchw;
  d.src = dnnl::memory::desc({g.batch, g.in_channels, g.height, g.width}, dt, activations);
  if (g.groups == 1) {
    d.weights = dnnl::memory::desc({g.out_channels, g.in_channels, g.kernel_h, g.kernel_w}, dt,
                                   tag::oihw);
  } else {
    d.weights = dnnl::memory::desc({g.groups, g.out_channels / g.groups,
                                    g.in_channels / g.groups, g.kernel_h, g.kernel_w},
                                   dt, tag::goihw);
  }
  d.bias = dnnl::memory::desc({g.out_channels}, dt, tag::x);
  d.dst = dnnl::memory::desc({g.batch, g.out_channels, g.out_h, g.out_w}, dt, activations);
  d.strides = {g.stride_h, g.stride_w};
  // oneDNN counts dilation from 0 (no gaps); the output size uses the same
  // floor division as loom's, so the right padding equals the left.
  d.dilates = {g.dilation_h - 1, g.dilation_w - 1};
  d.pad_l = {g.pad_h, g.pad_w};
  d.pad_r = {g.pad_h, g.pad_w};
  return d;
}

dnnl::primitive_attr user_scratchpad() {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

// The same shapes with the layouts left to the primitive: the weights', and
// the activations' unless they are channels last (NHWC), which oneDNN's
// kernels read and write as it is (no reorders into its blocked layouts).
Descs any_layout(const Descs& user, bool channels_last) {
  Descs d = user;
  auto any = [](const dnnl::memory::desc& m) {
    return dnnl::memory::desc(m.dims(), m.data_type(), tag::any);
  };
  if (!channels_last) {
    d.src = any(user.src);
    d.dst = any(user.dst);
  }
  d.weights = any(user.weights);
  return d;
}

dnnl::convolution_forward::primitive_desc forward_pd(const Descs& d, bool bias,
                                                     dnnl::algorithm algorithm) {
  const dnnl::convolution_forward::desc desc(
      dnnl::prop_kind::forward_training, algorithm, d.src, d.weights,
      bias ? d.bias : dnnl::memory::desc(), d.dst, d.strides, d.dilates, d.pad_l, d.pad_r);
  return dnnl::convolution_forward::primitive_desc(desc, user_scratchpad(), engine());
}

// One argument of a pass whose layout in the primitive differs from loom's:
// reordered into `internal` before the pass (inputs) or back after it
// (outputs).
struct Reorder {
  int arg;
  bool output;
  dnnl::memory::desc user, internal;
  dnnl::primitive to_internal, to_user;
};

// A matrix product's argument `to`: loom's buffer for the convolution's
// argument `from`, seen as the matrix `desc`.
struct View {
  int from, to;
  dnnl::memory::desc desc;
};

// One pass of one convolution: its primitive, scratch size and reorders, or
// none when oneDNN has no kernel for it here.  A pointwise convolution's
// pass may be a matrix product instead (views: its arguments).
struct Entry {
  bool supported = false;
  dnnl::primitive primitive;
  dnnl::memory::desc scratchpad;
  std::vector<Reorder> reorders;
  std::vector<View> views;
  std::string impl;  // oneDNN's name for the kernel, e.g. "jit:avx2"
};

// The ways a pass can run (WayChoices below).  Channels-last activations:
// oneDNN's direct convolution on NHWC as it is, its direct convolution on
// its blocked layouts through reorders, or -- for a pointwise convolution --
// its matrix product on the NHWC buffers as they are.  NCHW activations:
// its direct convolution through reorders into its blocked layouts (kDirect).
// Either: its Winograd convolution through reorders into the blocked
// layouts (float32 3x3 stride 1, where the CPU has a kernel).
enum class Way { kDirect = 0, kBlocked = 1, kMatmul = 2, kWinograd = 3 };

// A shape oneDNN 2.6's Winograd kernels (F(4x4, 3x3), float32, AVX-512)
// may take: 3x3, stride 1, no dilation or groups.  They compute the same
// sums with about 2.25x fewer multiplications (the transforms add rounding:
// errors of ~1e-6 of the outputs' magnitude against ~1e-7 for the direct
// kernels, as cuDNN's Winograd algorithms under cudnn.benchmark).
bool winograd_shape(const ConvGeometry& g, DType dtype) {
  return dtype == kFloat32 && g.kernel_h == 3 && g.kernel_w == 3 && g.stride_h == 1 &&
         g.stride_w == 1 && g.dilation_h == 1 && g.dilation_w == 1 && g.groups == 1;
}

// A 1x1 convolution with stride 1, no padding, dilation or groups, on
// channels-last activations, without a bias in this pass: the (batch *
// height * width) x channels matrix of its input times the weights'
// transpose is its output, so each pass is one matrix product on the
// buffers as they are (oneDNN's brgemm matmul, often faster than its NHWC
// convolution kernels on these shapes).
bool pointwise(const ConvGeometry& g, bool bias) {
  return g.channels_last && !bias && g.kernel_h == 1 && g.kernel_w == 1 && g.stride_h == 1 &&
         g.stride_w == 1 && g.pad_h == 0 && g.pad_w == 0 && g.dilation_h == 1 &&
         g.dilation_w == 1 && g.groups == 1;
}

// The matrix product for one pass of a pointwise convolution (M = batch *
// height * width rows of C input or O output channels; OIHW weights are
// the O x C matrix W):
//   forward          out[M, O]   = in[M, C] x W^T[C, O]
//   backward data    din[M, C]   = dout[M, O] x W[O, C]
//   backward weights dW[O, C]    = dout^T[O, M] x in[M, C]
Entry make_matmul_entry(ConvPass pass, const ConvGeometry& g, DType dtype) {
  Entry e;
  const auto dt = data_type(dtype);
  const int64_t M = g.batch * g.height * g.width, C = g.in_channels, O = g.out_channels;
  auto matrix = [&](int64_t rows, int64_t cols, int64_t row_stride, int64_t col_stride) {
    return dnnl::memory::desc({rows, cols}, dt, dims{row_stride, col_stride});
  };
  switch (pass) {
    case ConvPass::kForward:
      e.views = {{DNNL_ARG_SRC, DNNL_ARG_SRC, matrix(M, C, C, 1)},
                 {DNNL_ARG_WEIGHTS, DNNL_ARG_WEIGHTS, matrix(C, O, 1, C)},
                 {DNNL_ARG_DST, DNNL_ARG_DST, matrix(M, O, O, 1)}};
      break;
    case ConvPass::kBackwardData:
      e.views = {{DNNL_ARG_DIFF_DST, DNNL_ARG_SRC, matrix(M, O, O, 1)},
                 {DNNL_ARG_WEIGHTS, DNNL_ARG_WEIGHTS, matrix(O, C, C, 1)},
                 {DNNL_ARG_DIFF_SRC, DNNL_ARG_DST, matrix(M, C, C, 1)}};
      break;
    case ConvPass::kBackwardWeights:
      e.views = {{DNNL_ARG_DIFF_DST, DNNL_ARG_SRC, matrix(O, M, 1, O)},
                 {DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, matrix(M, C, C, 1)},
                 {DNNL_ARG_DIFF_WEIGHTS, DNNL_ARG_DST, matrix(O, C, C, 1)}};
      break;
  }
  try {
    const dnnl::matmul::primitive_desc pd(
        dnnl::matmul::desc(e.views[0].desc, e.views[1].desc, e.views[2].desc), user_scratchpad(),
        engine());
    e.primitive = dnnl::matmul(pd);
    e.scratchpad = pd.scratchpad_desc();
    e.impl = pd.impl_info_str();
    e.supported = e.impl.rfind("ref", 0) != 0;
  } catch (const dnnl::error&) {
    e.supported = false;
  }
  return e;
}

// The reorder for arg when the primitive's layout `internal` is not loom's.
void add_reorder(Entry& e, int arg, bool output, const dnnl::memory::desc& user,
                 const dnnl::memory::desc& internal) {
  if (internal == user) return;
  Reorder r{arg, output, user, internal, {}, {}};
  if (output)
    r.to_user = dnnl::reorder(dnnl::reorder::primitive_desc(engine(), internal, engine(), user));
  else
    r.to_internal =
        dnnl::reorder(dnnl::reorder::primitive_desc(engine(), user, engine(), internal));
  e.reorders.push_back(std::move(r));
}

// A kernel of oneDNN 2.6 known to compute this pass wrongly: its
// jit_bf16_1x1 backward-data kernel (avx512_core_bf16), given NHWC as it is
// (Way::kDirect), writes wrong input gradients when the output channels are
// odd (at images of 30, 60, 90 and 120 pixels of those tried; errors as large
// as the gradients; onednn_conv_test
// Bfloat16PointwiseBackwardDataWithOddOutputChannels).  The same kernel on
// the blocked layouts is right.
bool known_wrong(ConvPass pass, const ConvGeometry& g, Way way, const std::string& impl) {
  return pass == ConvPass::kBackwardData && way == Way::kDirect && g.channels_last &&
         g.out_channels % 2 == 1 && impl.rfind("jit_bf16_1x1", 0) == 0;
}

// Way::kDirect takes channels-last activations as they are; kBlocked and
// kWinograd reorder them into the primitive's own layouts (NCHW ones always
// are); kMatmul: make_matmul_entry.
Entry make_entry(ConvPass pass, const ConvGeometry& g, DType dtype, bool bias, Way way) {
  if (way == Way::kMatmul) return make_matmul_entry(pass, g, dtype);
  const auto algorithm = way == Way::kWinograd ? dnnl::algorithm::convolution_winograd
                                               : dnnl::algorithm::convolution_direct;
  Entry e;
  try {
    const Descs user = descs(g, dtype);
    const Descs d = any_layout(user, g.channels_last && way == Way::kDirect);
    const auto fwd = forward_pd(d, bias, algorithm);
    switch (pass) {
      case ConvPass::kForward:
        e.primitive = dnnl::convolution_forward(fwd);
        e.scratchpad = fwd.scratchpad_desc();
        e.impl = fwd.impl_info_str();
        add_reorder(e, DNNL_ARG_SRC, false, user.src, fwd.src_desc());
        add_reorder(e, DNNL_ARG_WEIGHTS, false, user.weights, fwd.weights_desc());
        add_reorder(e, DNNL_ARG_DST, true, user.dst, fwd.dst_desc());
        break;
      case ConvPass::kBackwardData: {
        const dnnl::convolution_backward_data::desc desc(algorithm, d.src, d.weights, d.dst,
                                                         d.strides, d.dilates, d.pad_l, d.pad_r);
        const dnnl::convolution_backward_data::primitive_desc pd(desc, user_scratchpad(),
                                                                 engine(), fwd);
        e.primitive = dnnl::convolution_backward_data(pd);
        e.scratchpad = pd.scratchpad_desc();
        e.impl = pd.impl_info_str();
        add_reorder(e, DNNL_ARG_DIFF_DST, false, user.dst, pd.diff_dst_desc());
        add_reorder(e, DNNL_ARG_WEIGHTS, false, user.weights, pd.weights_desc());
        add_reorder(e, DNNL_ARG_DIFF_SRC, true, user.src, pd.diff_src_desc());
        break;
      }
      case ConvPass::kBackwardWeights: {
        const dnnl::convolution_backward_weights::desc desc(
            algorithm, d.src, d.weights,
            bias ? d.bias : dnnl::memory::desc(), d.dst, d.strides, d.dilates, d.pad_l,
            d.pad_r);
        const dnnl::convolution_backward_weights::primitive_desc pd(desc, user_scratchpad(),
                                                                    engine(), fwd);
        e.primitive = dnnl::convolution_backward_weights(pd);
        e.scratchpad = pd.scratchpad_desc();
        e.impl = pd.impl_info_str();
        add_reorder(e, DNNL_ARG_SRC, false, user.src, pd.src_desc());
        add_reorder(e, DNNL_ARG_DIFF_DST, false, user.dst, pd.diff_dst_desc());
        add_reorder(e, DNNL_ARG_DIFF_WEIGHTS, true, user.weights, pd.diff_weights_desc());
        break;
      }
    }
    // oneDNN's reference kernels are loops over every index: slower than
    // loom's own by orders of magnitude, so they do not count as a kernel.
    e.supported = e.impl.rfind("ref", 0) != 0 && !known_wrong(pass, g, way, e.impl);
  } catch (const dnnl::error&) {
    e.supported = false;  // no kernel for this dtype/shape on this CPU
  }
  return e;
}

struct Key {
  ConvGeometry g;
  int pass, dtype, threads;
  bool bias;
  int way;  // a Way (see LayoutChoices)
  bool reuses_weights = false;  // choices only: timed under WeightReuse
  bool operator==(const Key& o) const {
    const ConvGeometry& a = g;
    const ConvGeometry& b = o.g;
    return pass == o.pass && dtype == o.dtype && threads == o.threads && bias == o.bias &&
           way == o.way && reuses_weights == o.reuses_weights &&
           a.batch == b.batch && a.in_channels == b.in_channels && a.height == b.height &&
           a.width == b.width && a.out_channels == b.out_channels &&
           a.kernel_h == b.kernel_h && a.kernel_w == b.kernel_w && a.stride_h == b.stride_h &&
           a.stride_w == b.stride_w && a.pad_h == b.pad_h && a.pad_w == b.pad_w &&
           a.dilation_h == b.dilation_h && a.dilation_w == b.dilation_w &&
           a.groups == b.groups && a.channels_last == b.channels_last;
  }
};

struct KeyHash {
  size_t operator()(const Key& k) const {
    const ConvGeometry& g = k.g;
    size_t h = 0;
    for (int64_t v : {g.batch, g.in_channels, g.height, g.width, g.out_channels, g.kernel_h,
                      g.kernel_w, g.stride_h, g.stride_w, g.pad_h, g.pad_w, g.dilation_h,
                      g.dilation_w, g.groups, int64_t(k.pass), int64_t(k.dtype),
                      int64_t(k.threads), int64_t(k.bias), int64_t(g.channels_last),
                      int64_t(k.way), int64_t(k.reuses_weights)})
      h = h * 1000003u ^ std::hash<int64_t>()(v);
    return h;
  }
};

// The primitives made so far, per (pass, geometry, dtype, threads, bias).
using Cache = PrimitiveCache<Key, Entry, std::unordered_map<Key, std::shared_ptr<const Entry>, KeyHash>>;

Cache& cache() {
  static Cache* c = new Cache;  // never destroyed: convolutions may run at exit
  return *c;
}

std::shared_ptr<const Entry> entry(ConvPass pass, const ConvGeometry& g, DType dtype, bool bias,
                                   Way way = Way::kDirect) {
  if (!g.channels_last && way == Way::kBlocked) way = Way::kDirect;  // the same for NCHW
  const Key key{g, int(pass), int(dtype), get_num_threads(), bias, int(way)};
  return cache().get(key, [&] { return make_entry(pass, g, dtype, bias, way); });
}

// For channels-last activations each pass has two ways in oneDNN: its
// kernels on NHWC as it is (brgconv and jit), or on its blocked layouts
// through reorders from and to NHWC.  The first is faster for most shapes;
// the second for small images (4x4 and 2x2 in ResNet-18 at 64x64, 7x7 in
// ResNet-50, where the NHWC forward kernel is up to 3x slower), by amounts
// that differ per CPU.  A pointwise convolution has a third, its matrix
// product (make_matmul_entry), up to 1.5x faster than the NHWC kernels on
// ResNet-50's 1x1 weight gradients.  A float32 3x3 convolution, in either
// layout, has Winograd's algorithm besides: 1.4-3x faster than the direct
// kernels on ResNet's 3x3 shapes down to 4x4 images, slower on 2x2.  So each
// pass of each shape is timed once, every way it has
// (tensor/cpu/TimedChoice.h, as ConvChoice.cpp times the backends), and the
// fastest runs it from then on.
using WayChoices = Choices<std::unordered_map<Key, int, KeyHash>>;  // a Way

WayChoices& way_choices() {
  static WayChoices* c = new WayChoices;  // never destroyed: convolutions may run at exit
  return *c;
}

dnnl::memory wrap(const dnnl::memory::desc& d, const void* p) {
  return dnnl::memory(d, engine(), const_cast<void*>(p));
}

Tensor bytes_for(const dnnl::memory::desc& d) {
  return empty({static_cast<int64_t>(d.get_size())}, kUInt8);
}

// Weight copies in oneDNN's layouts, kept for later passes that read the
// same weight at the same version (tensor/WeightReuse.h), at most 1 GiB.
using KeptWeights = KeptWeightCopies<dnnl::memory::desc>;

KeptWeights& kept_weights() {
  // Never destroyed: convolutions may run at exit.
  static KeptWeights* k = new KeptWeights(int64_t(1) << 30);
  return *k;
}

// prepare_kept_weights (tensor/WeightReuse.h) makes the copies of changed
// weights ahead of their passes.
int prepare_kept_weights_here(Device device) { return kept_weights().refresh(device); }
const bool kPreparerRegistered =
    (detail::register_kept_weight_preparer(&prepare_kept_weights_here), true);

// The weights a pass reads (their buffer and version), for KeptWeights; no
// counter: not kept.
struct WeightRead {
  const void* data = nullptr;
  WeightVersion version;
  bool kept() const { return version.counter != nullptr; }
};

// How to make a kept weight copy again: r's reorder of the weights at
// `data`, laid out as `from`, into a new buffer.
KeptWeights::Make remake(const Reorder& r, const dnnl::memory::desc& from, const void* data) {
  return [reorder = r.to_internal, from, to = r.internal, data] {
    Tensor copy = bytes_for(to);
    OmpThreads threads(get_num_threads());
    dnnl::stream stream(engine());
    try {
      reorder.execute(stream, {{DNNL_ARG_FROM, wrap(from, data)},
                               {DNNL_ARG_TO, wrap(to, copy.data_ptr())}});
      stream.wait();
    } catch (const dnnl::error& err) {
      LOOM_FAIL("conv2d: oneDNN's weight reorder failed: ", err.what());
    }
    return copy;
  };
}

// Inputs already reordered into a primitive's layout, kept for the next
// pass of the same call that reads them in that layout (both backward passes
// read the output gradient).
struct Reordered {
  std::vector<Tensor> keep;
  std::unordered_map<int, dnnl::memory> inputs;  // by argument
};

// Runs e's primitive on args (loom's buffers), through its reorders.  Scratch
// and the reordered copies come from loom's CPU allocator.  With `shared`,
// an input found there in the layout e wants is not reordered again, and the
// inputs e reorders are left there.
void execute(const Entry& e, std::unordered_map<int, dnnl::memory> args,
             Reordered* shared = nullptr, const WeightRead& weights = {}) {
  if (!e.views.empty()) {
    // A matrix product: its arguments are views of the convolution's.
    std::unordered_map<int, dnnl::memory> viewed;
    for (const View& v : e.views)
      viewed[v.to] = dnnl::memory(v.desc, engine(), args.at(v.from).get_data_handle());
    args = std::move(viewed);
  }
  std::vector<Tensor> keep;
  if (e.scratchpad.get_size() > 0) {
    keep.push_back(bytes_for(e.scratchpad));
    args[DNNL_ARG_SCRATCHPAD] = wrap(e.scratchpad, keep.back().data_ptr());
  }
  OmpThreads threads(get_num_threads());  // oneDNN sizes its regions by it
  dnnl::stream stream(engine());
  try {
    std::vector<std::pair<const Reorder*, dnnl::memory>> outputs;
    for (const Reorder& r : e.reorders) {
      const bool kept_weight = weights.kept() && !r.output && r.arg == DNNL_ARG_WEIGHTS &&
                               args.at(r.arg).get_data_handle() == weights.data;
      if (kept_weight) {
        Tensor copy = kept_weights().find(weights.version, weights.data, r.internal);
        detail::count_weight_reuse(copy.defined());
        if (!copy.defined()) {
          // Made (on a stream of its own) and kept with how to make it again.
          KeptWeights::Make make = remake(r, args.at(r.arg).get_desc(), weights.data);
          copy = make();
          kept_weights().keep(weights.version, weights.data, r.internal, copy, std::move(make));
        }
        keep.push_back(copy);
        args[r.arg] = wrap(r.internal, copy.data_ptr());
        continue;
      }
      if (!r.output && shared != nullptr) {
        const auto found = shared->inputs.find(r.arg);
        if (found != shared->inputs.end() && found->second.get_desc() == r.internal) {
          args[r.arg] = found->second;
          continue;
        }
      }
      keep.push_back(bytes_for(r.internal));
      dnnl::memory internal = wrap(r.internal, keep.back().data_ptr());
      dnnl::memory user = args.at(r.arg);
      if (r.output) {
        outputs.emplace_back(&r, user);
      } else {
        r.to_internal.execute(stream, {{DNNL_ARG_FROM, user}, {DNNL_ARG_TO, internal}});
        if (shared != nullptr) {
          shared->keep.push_back(keep.back());
          shared->inputs[r.arg] = internal;
        }
      }
      args[r.arg] = internal;
    }
    e.primitive.execute(stream, args);
    for (auto& [r, user] : outputs)
      r->to_user.execute(stream, {{DNNL_ARG_FROM, args.at(r->arg)}, {DNNL_ARG_TO, user}});
    stream.wait();
  } catch (const dnnl::error& err) {
    LOOM_FAIL("conv2d: oneDNN's ", e.impl, " kernel failed: ", err.what());
  }
}

// The ways a pass may run here, each with its entry; more than one are
// timed.  LOOM_ONEDNN_LAYOUT=auto offers every layout way a channels-last
// pass has, a pinned layout just its own (NHWC as it is where the pass lacks
// it); LOOM_ONEDNN_ALGORITHM=auto adds Winograd where it fits, =winograd
// runs it alone wherever it fits, =direct never.
using Ways = std::vector<std::pair<Way, std::shared_ptr<const Entry>>>;

Ways ways_of(ConvPass pass, const ConvGeometry& g, DType dtype, bool bias) {
  Ways ways;
  auto add = [&](Way way) {
    if (way == Way::kMatmul && !pointwise(g, bias)) return;
    auto e = entry(pass, g, dtype, bias, way);
    if (e->supported) ways.emplace_back(way, std::move(e));
  };
  const std::string& algorithm = conv_algorithm();
  const std::string& layout = channels_last_layout();
  const bool winograd = winograd_shape(g, dtype) && algorithm != "direct";
  if (winograd && algorithm == "winograd") {
    add(Way::kWinograd);
    if (!ways.empty()) return ways;
  }
  if (!g.channels_last) {
    add(Way::kDirect);
  } else if (layout == "auto") {
    add(Way::kDirect);
    add(Way::kBlocked);
    add(Way::kMatmul);
  } else {
    add(layout == "blocked" ? Way::kBlocked : layout == "matmul" ? Way::kMatmul : Way::kDirect);
    if (ways.empty()) add(Way::kDirect);
    if (ways.empty()) add(Way::kBlocked);
  }
  if (winograd && algorithm == "auto") add(Way::kWinograd);
  LOOM_CHECK(!ways.empty(), "conv2d: oneDNN has no ", dtype_name(dtype),
             " kernel for this convolution on this CPU (check onednn::available first)");
  return ways;
}

// One decision per pass and shape, bias or not (a weight-only backward
// runs the same kernels as the joint one, so their gradients agree) -- but
// a pointwise convolution has its matrix product only without a bias, so
// for it the bias is part of the decision's key.
Key choice_key(ConvPass pass, const ConvGeometry& g, DType dtype, bool bias) {
  // Under WeightReuse the ways are timed with the weights already in their
  // layouts (as later micro-batches run them): a choice of its own.
  return Key{g, int(pass), int(dtype), get_num_threads(), bias && pointwise(g, false), 0,
             WeightReuse::is_enabled()};
}

// The entry of the way timed fastest among `ways`, or null before the timing.
const Entry* chosen_way(const Ways& ways, ConvPass pass, const ConvGeometry& g, DType dtype,
                        bool bias) {
  int chosen = 0;
  if (!way_choices().find(choice_key(pass, g, dtype, bias), &chosen)) return nullptr;
  for (const auto& w : ways)
    if (int(w.first) == chosen) return w.second.get();
  return nullptr;
}

// Runs one pass through run(entry, shared): its one way, or the way
// WayChoices decided among several (timing each the first time, without
// sharing reordered inputs).  Each run computes the whole pass into its
// outputs.
void run_pass(ConvPass pass, const ConvGeometry& g, DType dtype, bool bias, Reordered* shared,
              const std::function<void(const Entry&, Reordered*)>& run) {
  const Ways ways = ways_of(pass, g, dtype, bias);
  if (ways.size() == 1) return run(*ways[0].second, shared);
  if (const Entry* e = chosen_way(ways, pass, g, dtype, bias)) return run(*e, shared);
  // The fastest way runs last, writing the outputs.
  std::vector<std::function<void()>> candidates;
  for (const auto& w : ways)
    candidates.push_back([&run, e = w.second.get()] { run(*e, nullptr); });
  way_choices().store(choice_key(pass, g, dtype, bias), int(ways[fastest_of(candidates)].first));
}

}  // namespace

const std::string& conv_backend() {
  static const std::string backend = read_setting("LOOM_CPU_CONV", {"onednn", "loom"});
  return backend;
}

const std::string& channels_last_layout() {
  static const std::string layout =
      read_setting("LOOM_ONEDNN_LAYOUT", {"nhwc", "blocked", "matmul"});
  return layout;
}

const std::string& conv_algorithm() {
  static const std::string algorithm =
      read_setting("LOOM_ONEDNN_ALGORITHM", {"direct", "winograd"});
  return algorithm;
}

bool available(ConvPass pass, const ConvGeometry& g, DType dtype) {
  if (dtype != kFloat32 && dtype != kBFloat16) return false;
  // Bias or not makes no difference to whether a kernel exists.
  const bool bias = pass != ConvPass::kBackwardData;
  return entry(pass, g, dtype, bias)->supported ||
         (g.channels_last && entry(pass, g, dtype, bias, Way::kBlocked)->supported);
}

std::string implementation(ConvPass pass, const ConvGeometry& g, DType dtype, bool bias) {
  const Ways ways = ways_of(pass, g, dtype, bias);
  if (ways.size() == 1) return ways[0].second->impl;
  const Entry* e = chosen_way(ways, pass, g, dtype, bias);
  return e != nullptr ? e->impl : std::string();
}

void conv2d_forward(const ConvGeometry& g, DType dtype, const void* input, const void* weight,
                    const void* bias, void* out, const WeightVersion& weight_version) {
  const Descs d = descs(g, dtype);
  std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, wrap(d.src, input)},
                                             {DNNL_ARG_WEIGHTS, wrap(d.weights, weight)},
                                             {DNNL_ARG_DST, wrap(d.dst, out)}};
  if (bias != nullptr) args[DNNL_ARG_BIAS] = wrap(d.bias, bias);
  const WeightRead read{weight, weight_version};
  run_pass(ConvPass::kForward, g, dtype, bias != nullptr, nullptr,
           [&](const Entry& e, Reordered*) { execute(e, args, nullptr, read); });
}

namespace {
void backward_data(const ConvGeometry& g, DType dtype, const void* weight, const void* grad_out,
                   void* grad_input, Reordered* shared, const WeightVersion& weight_version) {
  const Descs d = descs(g, dtype);
  const std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_DIFF_DST, wrap(d.dst, grad_out)},
                                                   {DNNL_ARG_WEIGHTS, wrap(d.weights, weight)},
                                                   {DNNL_ARG_DIFF_SRC, wrap(d.src, grad_input)}};
  const WeightRead read{weight, weight_version};
  run_pass(ConvPass::kBackwardData, g, dtype, false, shared,
           [&](const Entry& e, Reordered* sh) { execute(e, args, sh, read); });
}

void backward_weights(const ConvGeometry& g, DType dtype, const void* input,
                      const void* grad_out, void* grad_weight, void* grad_bias,
                      Reordered* shared) {
  const Descs d = descs(g, dtype);
  std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, wrap(d.src, input)},
                                             {DNNL_ARG_DIFF_DST, wrap(d.dst, grad_out)},
                                             {DNNL_ARG_DIFF_WEIGHTS, wrap(d.weights, grad_weight)}};
  if (grad_bias != nullptr) args[DNNL_ARG_DIFF_BIAS] = wrap(d.bias, grad_bias);
  run_pass(ConvPass::kBackwardWeights, g, dtype, grad_bias != nullptr, shared,
           [&](const Entry& e, Reordered* sh) { execute(e, args, sh); });
}
}  // namespace

void conv2d_backward_data(const ConvGeometry& g, DType dtype, const void* weight,
                          const void* grad_out, void* grad_input,
                          const WeightVersion& weight_version) {
  backward_data(g, dtype, weight, grad_out, grad_input, nullptr, weight_version);
}

void conv2d_backward_weights(const ConvGeometry& g, DType dtype, const void* input,
                             const void* grad_out, void* grad_weight, void* grad_bias) {
  backward_weights(g, dtype, input, grad_out, grad_weight, grad_bias, nullptr);
}

void conv2d_backward(const ConvGeometry& g, DType dtype, const void* input, const void* weight,
                     const void* grad_out, void* grad_input, void* grad_weight,
                     void* grad_bias, const WeightVersion& weight_version) {
  Reordered shared;
  backward_data(g, dtype, weight, grad_out, grad_input, &shared, weight_version);
  backward_weights(g, dtype, input, grad_out, grad_weight, grad_bias, &shared);
}

std::string version() {
  const dnnl_version_t* v = dnnl_version();
  return detail::str(v->major, ".", v->minor, ".", v->patch);
}

std::string effective_isa() {
  switch (dnnl::get_effective_cpu_isa()) {
    case dnnl::cpu_isa::sse41: return "sse4.1";
    case dnnl::cpu_isa::avx: return "avx";
    case dnnl::cpu_isa::avx2: return "avx2";
    case dnnl::cpu_isa::avx512_core: return "avx512_core";
    case dnnl::cpu_isa::avx512_core_vnni: return "avx512_core_vnni";
    case dnnl::cpu_isa::avx512_core_bf16: return "avx512_core_bf16";
    case dnnl::cpu_isa::avx512_core_amx: return "avx512_core_amx";
    default: return "?";
  }
}

std::string describe() { return "oneDNN " + version() + ", " + effective_isa(); }

}  // namespace onednn
}  // namespace cpu
}  // namespace loom
