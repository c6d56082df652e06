// Elementwise loops over strided CPU tensors, the engine of every pointwise op.
//
// All operands have the output's shape (inputs are expand()ed first, so a
// broadcast dim has stride 0).  Dims are walked in the output's memory order
// and coalesced where the layout allows, a
// fully contiguous case runs as one flat loop, and the index range is split
// over the intra-op threads.
#pragma once

#include <algorithm>
#include <array>
#include <tuple>
#include <utility>
#include <cstdint>
#include <vector>

#include "tensor/Parallel.h"
#include "tensor/Tensor.h"

namespace loom {
namespace cpu {

// A strided view of N operands of one shape, dims coalesced.
template <size_t N>
struct StridedPlan {
  std::vector<int64_t> sizes;                    // coalesced, outermost first
  std::array<std::vector<int64_t>, N> strides;   // in bytes, per operand
  std::array<char*, N> base;
  int64_t numel = 1;
  bool contiguous = true;  // every operand dense and in the same order
};

template <size_t N>
StridedPlan<N> make_plan(const std::array<const Tensor*, N>& ops) {
  StridedPlan<N> plan;
  const IntList& sizes = ops[0]->sizes();
  const int64_t rank = static_cast<int64_t>(sizes.size());
  for (size_t k = 0; k < N; ++k) plan.base[k] = static_cast<char*>(ops[k]->data_ptr());
  // Drop size-1 dims and visit the rest in the output's memory order
  // (largest stride of operand 0 first; a channels-last output walks N, H,
  // W, C, so its runs are dense), then merge neighbours whose strides chain
  // for every operand.
  std::vector<int64_t> order;
  for (int64_t d = 0; d < rank; ++d)
    if (sizes[d] != 1) order.push_back(d);
  const IntList& out_strides = ops[0]->strides();
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return out_strides[a] > out_strides[b]; });
  std::vector<int64_t> sz;
  std::array<std::vector<int64_t>, N> st;
  for (int64_t d : order) {
    bool merge = !sz.empty();
    for (size_t k = 0; k < N && merge; ++k) {
      const int64_t es = static_cast<int64_t>(ops[k]->element_size());
      merge = st[k].back() == ops[k]->strides()[d] * es * sizes[d];
    }
    if (merge) {
      sz.back() *= sizes[d];
      for (size_t k = 0; k < N; ++k)
        st[k].back() = ops[k]->strides()[d] * static_cast<int64_t>(ops[k]->element_size());
    } else {
      sz.push_back(sizes[d]);
      for (size_t k = 0; k < N; ++k)
        st[k].push_back(ops[k]->strides()[d] * static_cast<int64_t>(ops[k]->element_size()));
    }
  }
  if (sz.empty()) {
    sz.push_back(1);
    for (size_t k = 0; k < N; ++k) st[k].push_back(static_cast<int64_t>(ops[k]->element_size()));
  }
  plan.sizes = sz;
  plan.strides = st;
  for (int64_t s : sz) plan.numel *= s;
  plan.contiguous = sz.size() == 1;
  for (size_t k = 0; k < N; ++k)
    plan.contiguous = plan.contiguous &&
                      st[k][0] == static_cast<int64_t>(ops[k]->element_size());
  return plan;
}

// Calls loop(ptrs, inner_strides_bytes, count) for runs along the innermost
// dim, covering every element once; runs are split over threads.
template <size_t N, typename Loop>
void for_each_run(const StridedPlan<N>& plan, int64_t grain, const Loop& loop) {
  if (plan.numel == 0) return;
  const int64_t rank = static_cast<int64_t>(plan.sizes.size());
  const int64_t inner = plan.sizes[rank - 1];
  std::array<int64_t, N> inner_strides;
  for (size_t k = 0; k < N; ++k) inner_strides[k] = plan.strides[k][rank - 1];
  parallel_for(0, plan.numel, grain, [&](int64_t begin, int64_t end) {
    // Multi-index of `begin`.
    std::vector<int64_t> idx(rank, 0);
    int64_t rem = begin;
    for (int64_t d = rank - 1; d >= 0; --d) {
      idx[d] = rem % plan.sizes[d];
      rem /= plan.sizes[d];
    }
    int64_t pos = begin;
    while (pos < end) {
      std::array<char*, N> ptrs;
      for (size_t k = 0; k < N; ++k) {
        char* p = plan.base[k];
        for (int64_t d = 0; d < rank; ++d) p += idx[d] * plan.strides[k][d];
        ptrs[k] = p;
      }
      const int64_t count = std::min(inner - idx[rank - 1], end - pos);
      loop(ptrs, inner_strides, count);
      pos += count;
      idx[rank - 1] += count;
      for (int64_t d = rank - 1; d > 0 && idx[d] >= plan.sizes[d]; --d) {
        idx[d] = 0;
        ++idx[d - 1];
      }
    }
  });
}

// One run of `map`: a dense fast path, else strided.
template <typename Out, typename... Ins, typename Op, size_t... I>
inline void apply_run(const std::array<char*, sizeof...(Ins) + 1>& p,
                      const std::array<int64_t, sizeof...(Ins) + 1>& s, int64_t n, const Op& op,
                      std::index_sequence<I...>) {
  bool dense = s[0] == static_cast<int64_t>(sizeof(Out));
  ((dense = dense && s[I + 1] == static_cast<int64_t>(sizeof(Ins))), ...);
  if (dense) {
    Out* o = reinterpret_cast<Out*>(p[0]);
    std::tuple<const Ins*...> in{reinterpret_cast<const Ins*>(p[I + 1])...};
    for (int64_t i = 0; i < n; ++i) o[i] = op(std::get<I>(in)[i]...);
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    *reinterpret_cast<Out*>(p[0] + i * s[0]) =
        op(*reinterpret_cast<const Ins*>(p[I + 1] + i * s[I + 1])...);
  }
}


// out[i] = op(in[i]...) elementwise with typed values.  `out` and `ins` must
// already share one shape (broadcast with expand).  Out is the C++ type of
// `out`, Ins those of the inputs.
template <typename Out, typename... Ins, typename Op>
void map(const Tensor& out, const std::array<const Tensor*, sizeof...(Ins)>& ins, const Op& op) {
  constexpr size_t N = sizeof...(Ins) + 1;
  std::array<const Tensor*, N> ops;
  ops[0] = &out;
  for (size_t k = 0; k < sizeof...(Ins); ++k) ops[k + 1] = ins[k];
  const StridedPlan<N> plan = make_plan<N>(ops);
  for_each_run<N>(plan, kElementwiseGrain, [&](const std::array<char*, N>& p,
                                               const std::array<int64_t, N>& s, int64_t n) {
    apply_run<Out, Ins...>(p, s, n, op, std::index_sequence_for<Ins...>{});
  });
}

}  // namespace cpu
}  // namespace loom
