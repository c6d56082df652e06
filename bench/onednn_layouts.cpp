// oneDNN's convolutions on one model's conv shapes with the activations in
// three layouts, all three passes of a training step per shape, weighted by
// how often the model uses each shape:
//   nchw+reorders  NCHW buffers reordered into oneDNN's blocked layouts and
//                  back around every pass (what PyTorch's NCHW step does);
//   nhwc           channels-last buffers straight into its NHWC kernels
//                  (only the weights reordered);
//   blocked-only   its blocked layouts with no reorder at all (the bound for
//                  activations kept blocked between ops);
//   matmul         for 1x1 stride-1 shapes, each pass as one matrix product
//                  on the NHWC buffers (oneDNN's matmul);
//   winograd       for float32 3x3 stride-1 shapes (same column), oneDNN's
//                  Winograd kernels through reorders from NCHW;
// and "best of" the others but blocked-only per pass (what loom's timed
// layout choice, tensor/cpu/OneDnnConvolution.cpp, aims at).
//   bazel run -c opt //bench:onednn_layouts -- [resnet50|resnet18] [bf16|f32] [reps]
// Uses oneDNN directly (not loom), on OMP_NUM_THREADS threads.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include <dnnl.hpp>

namespace {

using tag = dnnl::memory::format_tag;
using dt = dnnl::memory::data_type;

dnnl::engine& eng() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

struct Shape {
  long c, h, o, k, stride, pad, uses;
  bool first;  // the stem: no input gradient
};

struct Times {
  double f = 0, d = 0, w = 0;
  double total() const { return f + d + w; }
};

double best_ms(dnnl::stream& s, int reps, const std::function<void()>& fn) {
  fn();
  s.wait();
  double best = 1e30;
  for (int i = 0; i < reps; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    s.wait();
    best = std::min(best, std::chrono::duration<double, std::milli>(
                              std::chrono::steady_clock::now() - t0)
                              .count());
  }
  return best;
}

// One pass's primitive with its arguments, and the reorders around it.
struct Pass {
  std::vector<std::function<void(dnnl::stream&)>> before, after;
  std::function<void(dnnl::stream&)> run;
};

// A buffer of `want`'s layout for user memory u: u itself when they match,
// else a new one, with a reorder from u before the pass (inputs) or into u
// after it (outputs) when `reorders`.
dnnl::memory prepare(const dnnl::memory& u, const dnnl::memory::desc& want, Pass& p, bool output,
                     bool reorders) {
  if (want == u.get_desc()) return u;
  dnnl::memory m(want, eng());
  if (!reorders) return m;
  dnnl::memory user = u;
  if (output) {
    dnnl::reorder r(m, user);
    p.after.push_back([r, m, user](dnnl::stream& s) mutable { r.execute(s, m, user); });
  } else {
    dnnl::reorder r(user, m);
    p.before.push_back([r, m, user](dnnl::stream& s) mutable { r.execute(s, user, m); });
  }
  return m;
}

Times time_shape(const Shape& sh, long n, dt type, tag activations, bool reorders, int reps,
                 dnnl::algorithm algorithm = dnnl::algorithm::convolution_direct) {
  const long oh = (sh.h + 2 * sh.pad - sh.k) / sh.stride + 1;
  const dnnl::memory::desc src_u({n, sh.c, sh.h, sh.h}, type, activations);
  const dnnl::memory::desc dst_u({n, sh.o, oh, oh}, type, activations);
  const dnnl::memory::desc w_u({sh.o, sh.c, sh.k, sh.k}, type, tag::oihw);
  const dnnl::memory::desc bias({sh.o}, type, tag::x);
  auto any = [](const dnnl::memory::desc& d) { return dnnl::memory::desc(d.dims(), d.data_type(), tag::any); };
  // NHWC buffers go to the kernels as they are; NCHW ones to the layouts the
  // primitive picks.
  const auto src_p = activations == tag::nhwc ? src_u : any(src_u);
  const auto dst_p = activations == tag::nhwc ? dst_u : any(dst_u);
  const dnnl::memory::dims strides{sh.stride, sh.stride}, dil{0, 0}, pad{sh.pad, sh.pad};
  const dnnl::convolution_forward::primitive_desc fpd(
      dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training,
                                      algorithm, src_p, any(w_u), bias,
                                      dst_p, strides, dil, pad, pad),
      eng());
  const dnnl::convolution_backward_data::primitive_desc dpd(
      dnnl::convolution_backward_data::desc(algorithm, src_p,
                                            any(w_u), dst_p, strides, dil, pad, pad),
      eng(), fpd);
  const dnnl::convolution_backward_weights::primitive_desc wpd(
      dnnl::convolution_backward_weights::desc(algorithm, src_p,
                                               any(w_u), bias, dst_p, strides, dil, pad, pad),
      eng(), fpd);
  dnnl::memory x(src_u, eng()), y(dst_u, eng()), w(w_u, eng()), b(bias, eng());
  dnnl::memory gy(dst_u, eng()), gx(src_u, eng()), gw(w_u, eng()), gb(bias, eng());
  dnnl::stream s(eng());
  auto timed = [&](Pass& p) {
    return best_ms(s, reps, [&] {
      for (auto& f : p.before) f(s);
      p.run(s);
      for (auto& f : p.after) f(s);
    });
  };
  Times t;
  {
    Pass p;
    dnnl::memory px = prepare(x, fpd.src_desc(), p, false, reorders);
    dnnl::memory pw = prepare(w, fpd.weights_desc(), p, false, reorders);
    dnnl::memory py = prepare(y, fpd.dst_desc(), p, true, reorders);
    dnnl::convolution_forward prim(fpd);
    p.run = [&](dnnl::stream& st) {
      prim.execute(st, {{DNNL_ARG_SRC, px}, {DNNL_ARG_WEIGHTS, pw}, {DNNL_ARG_BIAS, b},
                        {DNNL_ARG_DST, py}});
    };
    t.f = timed(p);
  }
  if (!sh.first) {
    Pass p;
    dnnl::memory pgy = prepare(gy, dpd.diff_dst_desc(), p, false, reorders);
    dnnl::memory pw = prepare(w, dpd.weights_desc(), p, false, reorders);
    dnnl::memory pgx = prepare(gx, dpd.diff_src_desc(), p, true, reorders);
    dnnl::convolution_backward_data prim(dpd);
    p.run = [&](dnnl::stream& st) {
      prim.execute(st, {{DNNL_ARG_DIFF_DST, pgy}, {DNNL_ARG_WEIGHTS, pw},
                        {DNNL_ARG_DIFF_SRC, pgx}});
    };
    t.d = timed(p);
  }
  {
    Pass p;
    dnnl::memory px = prepare(x, wpd.src_desc(), p, false, reorders);
    dnnl::memory pgy = prepare(gy, wpd.diff_dst_desc(), p, false, reorders);
    dnnl::memory pgw = prepare(gw, wpd.diff_weights_desc(), p, true, reorders);
    dnnl::convolution_backward_weights prim(wpd);
    p.run = [&](dnnl::stream& st) {
      prim.execute(st, {{DNNL_ARG_SRC, px}, {DNNL_ARG_DIFF_DST, pgy},
                        {DNNL_ARG_DIFF_WEIGHTS, pgw}, {DNNL_ARG_DIFF_BIAS, gb}});
    };
    t.w = timed(p);
  }
  return t;
}

// A 1x1 stride-1 convolution's passes as matrix products on NHWC buffers
// (M = n * h * w rows; OIHW weights as the O x C matrix W): out = in x W^T,
// din = dout x W, dW = dout^T x in.
Times time_matmul(const Shape& sh, long n, dt type, int reps) {
  const long M = n * sh.h * sh.h, C = sh.c, O = sh.o;
  auto mat = [&](long rows, long cols, long row_stride, long col_stride) {
    return dnnl::memory::desc({rows, cols}, type, dnnl::memory::dims{row_stride, col_stride});
  };
  dnnl::stream s(eng());
  auto time_mm = [&](const dnnl::memory::desc& a, const dnnl::memory::desc& b,
                     const dnnl::memory::desc& c) {
    const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a, b, c), eng());
    dnnl::memory am(a, eng()), bm(b, eng()), cm(c, eng());
    dnnl::matmul prim(pd);
    return best_ms(s, reps, [&] {
      prim.execute(s, {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, cm}});
    });
  };
  Times t;
  t.f = time_mm(mat(M, C, C, 1), mat(C, O, 1, C), mat(M, O, O, 1));
  t.d = time_mm(mat(M, O, O, 1), mat(O, C, C, 1), mat(M, C, C, 1));
  t.w = time_mm(mat(O, M, 1, O), mat(M, C, C, 1), mat(O, C, C, 1));
  return t;
}

std::vector<Shape> resnet50() {  // batch 16, 224x224
  return {{3, 224, 64, 7, 2, 3, 1, true},      {64, 56, 64, 1, 1, 0, 1, false},
          {64, 56, 64, 3, 1, 1, 3, false},     {64, 56, 256, 1, 1, 0, 4, false},
          {256, 56, 64, 1, 1, 0, 2, false},    {256, 56, 128, 1, 1, 0, 1, false},
          {128, 56, 128, 3, 2, 1, 1, false},   {128, 28, 512, 1, 1, 0, 4, false},
          {256, 56, 512, 1, 2, 0, 1, false},   {512, 28, 128, 1, 1, 0, 3, false},
          {128, 28, 128, 3, 1, 1, 3, false},   {512, 28, 256, 1, 1, 0, 1, false},
          {256, 28, 256, 3, 2, 1, 1, false},   {256, 14, 1024, 1, 1, 0, 6, false},
          {512, 28, 1024, 1, 2, 0, 1, false},  {1024, 14, 256, 1, 1, 0, 5, false},
          {256, 14, 256, 3, 1, 1, 5, false},   {1024, 14, 512, 1, 1, 0, 1, false},
          {512, 14, 512, 3, 2, 1, 1, false},   {512, 7, 2048, 1, 1, 0, 3, false},
          {1024, 14, 2048, 1, 2, 0, 1, false}, {2048, 7, 512, 1, 1, 0, 2, false},
          {512, 7, 512, 3, 1, 1, 2, false}};
}

std::vector<Shape> resnet18() {  // batch 32, 64x64
  return {{3, 64, 64, 7, 2, 3, 1, true},    {64, 16, 64, 3, 1, 1, 4, false},
          {64, 16, 128, 3, 2, 1, 1, false}, {64, 16, 128, 1, 2, 0, 1, false},
          {128, 8, 128, 3, 1, 1, 3, false}, {128, 8, 256, 3, 2, 1, 1, false},
          {128, 8, 256, 1, 2, 0, 1, false}, {256, 4, 256, 3, 1, 1, 3, false},
          {256, 4, 512, 3, 2, 1, 1, false}, {256, 4, 512, 1, 2, 0, 1, false},
          {512, 2, 512, 3, 1, 1, 3, false}};
}

void add(Times& sum, const Times& t, long uses) {
  sum.f += uses * t.f;
  sum.d += uses * t.d;
  sum.w += uses * t.w;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string model = argc > 1 ? argv[1] : "resnet50";
  const std::string type_name = argc > 2 ? argv[2] : "bf16";
  const int reps = argc > 3 ? std::atoi(argv[3]) : 3;
  if ((model != "resnet50" && model != "resnet18") || (type_name != "bf16" && type_name != "f32")) {
    std::fprintf(stderr, "usage: onednn_layouts [resnet50|resnet18] [bf16|f32] [reps]\n");
    return 2;
  }
  const dt type = type_name == "bf16" ? dt::bf16 : dt::f32;
  const bool r50 = model == "resnet50";
  const long n = r50 ? 16 : 32;
  std::printf("%s %s batch %ld, ms per pass (forward / input grad / weight grad)\n",
              model.c_str(), type_name.c_str(), n);
  std::printf("%-24s %4s %22s %22s %22s %22s\n", "C,HW->O,k,s", "uses", "nchw+reorders", "nhwc",
              "blocked-only", "matmul | winograd");
  Times sum_nchw, sum_nhwc, sum_blocked, sum_best, sum_best3;
  for (const Shape& sh : r50 ? resnet50() : resnet18()) {
    try {
      const Times a = time_shape(sh, n, type, tag::nchw, true, reps);
      const Times b = time_shape(sh, n, type, tag::nhwc, true, reps);
      const Times c = time_shape(sh, n, type, tag::nchw, false, reps);
      std::printf("%5ld,%4ld->%5ld,%ldx%ld,s%ld %4ld %6.2f %6.2f %6.2f  %6.2f %6.2f %6.2f  %6.2f %6.2f %6.2f",
                  sh.c, sh.h, sh.o, sh.k, sh.k, sh.stride, sh.uses, a.f, a.d, a.w, b.f, b.d, b.w,
                  c.f, c.d, c.w);
      const Times best{std::min(a.f, b.f), std::min(a.d, b.d), std::min(a.w, b.w)};
      Times best3 = best;
      if (sh.k == 1 && sh.stride == 1) {
        const Times m = time_matmul(sh, n, type, reps);
        std::printf("  %6.2f %6.2f %6.2f", m.f, m.d, m.w);
        best3 = {std::min(best.f, m.f), std::min(best.d, m.d), std::min(best.w, m.w)};
      } else if (sh.k == 3 && sh.stride == 1 && type == dt::f32) {
        try {  // AVX-512 only in oneDNN 2.6
          const Times w = time_shape(sh, n, type, tag::nchw, true, reps,
                                     dnnl::algorithm::convolution_winograd);
          std::printf("  %6.2f %6.2f %6.2f", w.f, w.d, w.w);
          best3 = {std::min(best.f, w.f), std::min(best.d, w.d), std::min(best.w, w.w)};
        } catch (const dnnl::error&) {
        }
      }
      std::printf("\n");
      add(sum_nchw, a, sh.uses);
      add(sum_nhwc, b, sh.uses);
      add(sum_blocked, c, sh.uses);
      add(sum_best, best, sh.uses);
      add(sum_best3, best3, sh.uses);
    } catch (const dnnl::error& e) {
      std::fprintf(stderr, "no kernel for this shape here: %s\n", e.what());
      return 1;
    }
  }
  std::printf("\nper step, ms: total (forward / input grad / weight grad)\n");
  for (auto [label, t] : {std::pair<const char*, Times>{"nchw+reorders", sum_nchw},
                          {"nhwc", sum_nhwc},
                          {"best of the two", sum_best},
                          {"best of three", sum_best3},
                          {"blocked-only", sum_blocked}})
    std::printf("  %-16s %7.1f (%.1f / %.1f / %.1f)\n", label, t.total(), t.f, t.d, t.w);
  std::printf("(best of three: nchw+reorders, nhwc and, for 1x1 stride 1, matmul or, for\n"
              " float32 3x3 stride 1, Winograd through reorders from NCHW)\n");
  return 0;
}
