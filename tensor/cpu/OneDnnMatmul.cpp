// oneDNN matmul for bfloat16; see OneDnnMatmul.h.
#include "tensor/cpu/OneDnnMatmul.h"

#include <memory>
#include <string>
#include <tuple>
#include <unordered_map>

#include <dnnl.hpp>

#include "tensor/Error.h"
#include "tensor/Factory.h"
#include "tensor/Parallel.h"
#include "tensor/cpu/OmpThreads.h"
#include "tensor/cpu/OneDnnEngine.h"

namespace loom {
namespace cpu {
namespace onednn {
namespace {

using dims = dnnl::memory::dims;
using dt = dnnl::memory::data_type;

// A (batch, rows, cols) operand's desc: strides in elements, a batch of one
// when the operand is shared by every batch entry.
dnnl::memory::desc operand_desc(int64_t batch, int64_t rows, int64_t cols,
                                const MatmulOperand& op) {
  const int64_t row_stride = op.trans ? 1 : op.ld, col_stride = op.trans ? op.ld : 1;
  const bool shared = op.batch_stride == 0;
  return dnnl::memory::desc({shared ? 1 : batch, rows, cols}, dt::bf16,
                            dims{shared ? rows * cols : op.batch_stride, row_stride, col_stride});
}

// Everything a primitive depends on.
using Key = std::tuple<int64_t, int64_t, int64_t, int64_t, bool, int64_t, int64_t, bool, int64_t,
                       int64_t, bool, int>;

struct Entry {
  dnnl::matmul primitive;
  dnnl::memory::desc a, b, c, scratchpad;
};

Entry make_entry(int64_t batch, int64_t m, int64_t n, int64_t k, const MatmulOperand& a,
                 const MatmulOperand& b, bool accumulate) {
  Entry e;
  e.a = operand_desc(batch, m, k, a);
  e.b = operand_desc(batch, k, n, b);
  e.c = dnnl::memory::desc({batch, m, n}, dt::bf16, dims{m * n, n, 1});
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  if (accumulate) {
    dnnl::post_ops ops;
    ops.append_sum(1.0f);
    attr.set_post_ops(ops);
  }
  const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(e.a, e.b, e.c), attr, engine());
  e.primitive = dnnl::matmul(pd);
  e.scratchpad = pd.scratchpad_desc();
  return e;
}

// The primitives made so far, per shape, layout, accumulation and threads.
using Cache = PrimitiveCache<Key, Entry>;

Cache& cache() {
  static Cache* c = new Cache;  // never destroyed: products may run at exit
  return *c;
}

std::shared_ptr<const Entry> entry(int64_t batch, int64_t m, int64_t n, int64_t k,
                                   const MatmulOperand& a, const MatmulOperand& b,
                                   bool accumulate) {
  const Key key{batch,   m,    n,   k,        a.trans,    a.ld, a.batch_stride,
                b.trans, b.ld, b.batch_stride, accumulate, get_num_threads()};
  return cache().get(key, [&] {
    try {
      return make_entry(batch, m, n, k, a, b, accumulate);
    } catch (const dnnl::error& err) {
      LOOM_FAIL("matmul: oneDNN has no bfloat16 kernel for (", batch, ", ", m, ", ", k, ") @ (",
                k, ", ", n, "): ", err.what());
    }
  });
}

bool ask_bf16_matmul() {
  try {
    const dnnl::memory::desc d({64, 64}, dt::bf16, dnnl::memory::format_tag::ab);
    const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(d, d, d), engine());
    return std::string(pd.impl_info_str()).find("ref") == std::string::npos;
  } catch (const dnnl::error&) {
    return false;
  }
}

}  // namespace

bool bf16_matmul_available() {
  static const bool available = ask_bf16_matmul();
  return available;
}

void matmul(DType dtype, int64_t batch, int64_t m, int64_t n, int64_t k, const MatmulOperand& a,
            const MatmulOperand& b, void* c, bool accumulate) {
  LOOM_CHECK(dtype == kBFloat16, "onednn::matmul: expected bfloat16, got ", dtype_name(dtype));
  const auto e = entry(batch, m, n, k, a, b, accumulate);
  Tensor scratch;
  std::unordered_map<int, dnnl::memory> args{
      {DNNL_ARG_SRC, dnnl::memory(e->a, engine(), const_cast<void*>(a.data))},
      {DNNL_ARG_WEIGHTS, dnnl::memory(e->b, engine(), const_cast<void*>(b.data))},
      {DNNL_ARG_DST, dnnl::memory(e->c, engine(), c)}};
  if (e->scratchpad.get_size() > 0) {
    scratch = empty({static_cast<int64_t>(e->scratchpad.get_size())}, kUInt8);
    args[DNNL_ARG_SCRATCHPAD] = dnnl::memory(e->scratchpad, engine(), scratch.data_ptr());
  }
  OmpThreads threads(get_num_threads());
  try {
    dnnl::stream stream(engine());
    e->primitive.execute(stream, args);
    stream.wait();
  } catch (const dnnl::error& err) {
    LOOM_FAIL("matmul: oneDNN's bfloat16 kernel failed: ", err.what());
  }
}

}  // namespace onednn
}  // namespace cpu
}  // namespace loom
