// The one oneDNN CPU engine loom's oneDNN kernels share (convolutions,
// matrix products), created on first use and never destroyed (kernels may
// run at exit).
#pragma once

#include <dnnl.hpp>

namespace loom {
namespace cpu {
namespace onednn {

inline const dnnl::engine& engine() {
  static const dnnl::engine* eng = new dnnl::engine(dnnl::engine::kind::cpu, 0);
  return *eng;
}

}  // namespace onednn
}  // namespace cpu
}  // namespace loom
