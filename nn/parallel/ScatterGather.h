// Scatter and gather for DataParallel: splitting nested inputs into one
// chunk per device, and joining the replicas' nested outputs on one device.
//
// A "tree" is a Tensor, or a std::vector, std::tuple or std::pair of trees;
// any other type is a leaf that is not a tensor (an int, a string, a flag).
//
//   scatter(inputs, 3, 0)     every Tensor in `inputs` chunked along dim 0
//                             as Tensor::chunk(3, 0) does; one copy of the
//                             tree per chunk, other leaves copied as they
//                             are (as PyTorch's scatter).
//   move_to(tree, device)     every Tensor moved with Tensor::to(device).
//   gather(outputs, dev, 0)   the replicas' trees joined into one: tensors
//                             moved to `dev` and concatenated along dim 0,
//                             vectors, tuples and pairs element by element.
//
// All three are differentiable (chunk, to and cat record the graph), so
// gradients of the gathered output flow back to the scattered inputs.
#pragma once

#include <cstddef>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "tensor/Tensor.h"

namespace loom {
namespace nn {
namespace parallel {

namespace detail {

// How a tree type is walked: for_each visits every Tensor in order; map
// rebuilds the tree with every Tensor replaced by f(tensor).
template <typename T>
struct TensorTree {  // a leaf that is not a tensor
  template <typename F>
  static void for_each(const T&, F&) {}
  template <typename F>
  static T map(const T& value, F&) {
    return value;
  }
};

template <>
struct TensorTree<Tensor> {
  template <typename F>
  static void for_each(const Tensor& t, F& f) {
    f(t);
  }
  template <typename F>
  static Tensor map(const Tensor& t, F& f) {
    return f(t);
  }
};

template <typename T, typename A>
struct TensorTree<std::vector<T, A>> {
  template <typename F>
  static void for_each(const std::vector<T, A>& v, F& f) {
    for (const T& x : v) TensorTree<T>::for_each(x, f);
  }
  template <typename F>
  static std::vector<T, A> map(const std::vector<T, A>& v, F& f) {
    std::vector<T, A> out;
    out.reserve(v.size());
    for (const T& x : v) out.push_back(TensorTree<T>::map(x, f));
    return out;
  }
};

template <typename... T>
struct TensorTree<std::tuple<T...>> {
  template <typename F>
  static void for_each(const std::tuple<T...>& v, F& f) {
    std::apply([&](const T&... x) { (TensorTree<T>::for_each(x, f), ...); }, v);
  }
  template <typename F>
  static std::tuple<T...> map(const std::tuple<T...>& v, F& f) {
    // Braced initialisation keeps the left-to-right order of the calls.
    return std::apply([&](const T&... x) { return std::tuple<T...>{TensorTree<T>::map(x, f)...}; },
                      v);
  }
};

template <typename A, typename B>
struct TensorTree<std::pair<A, B>> {
  template <typename F>
  static void for_each(const std::pair<A, B>& v, F& f) {
    TensorTree<A>::for_each(v.first, f);
    TensorTree<B>::for_each(v.second, f);
  }
  template <typename F>
  static std::pair<A, B> map(const std::pair<A, B>& v, F& f) {
    A first = TensorTree<A>::map(v.first, f);
    B second = TensorTree<B>::map(v.second, f);
    return {std::move(first), std::move(second)};
  }
};

// How replicas' outputs of one tree type are joined.  Only tensors and
// containers of them can be gathered.
template <typename T>
struct Gather {
  static_assert(sizeof(T) == 0,
                "DataParallel can gather only Tensor, std::vector, std::tuple and std::pair "
                "outputs (of tensors)");
};

}  // namespace detail

// Calls f(tensor) for every Tensor in the tree, depth first, left to right.
template <typename T, typename F>
void for_each_tensor(const T& tree, F&& f) {
  detail::TensorTree<T>::for_each(tree, f);
}

// The tree with every Tensor t replaced by f(t), visited as for_each_tensor.
template <typename T, typename F>
T map_tensors(const T& tree, F&& f) {
  return detail::TensorTree<T>::map(tree, f);
}

// Chunks every tensor of `tensors` along `dim` as Tensor::chunk(devices, dim)
// and returns pieces[i][k], chunk k of tensor i.  An empty dimension gives
// one (empty) chunk.  Throws loom::Error when `tensors` is empty, when a
// tensor is undefined or has no dimension `dim`, or when two tensors give
// different numbers of chunks (PyTorch would silently drop the extra ones).
std::vector<std::vector<Tensor>> chunk_tensors(const std::vector<Tensor>& tensors,
                                               size_t devices, int64_t dim);

// One copy of `inputs` per chunk, its tensors replaced by their chunks (views
// on the tensors' own devices; move_to places them).  Throws as chunk_tensors.
template <typename T>
std::vector<T> scatter(const T& inputs, size_t devices, int64_t dim) {
  std::vector<Tensor> tensors;
  for_each_tensor(inputs, [&](const Tensor& t) { tensors.push_back(t); });
  const std::vector<std::vector<Tensor>> pieces = chunk_tensors(tensors, devices, dim);
  const size_t chunks = pieces.front().size();
  std::vector<T> out;
  out.reserve(chunks);
  for (size_t k = 0; k < chunks; ++k) {
    size_t leaf = 0;
    out.push_back(map_tensors(inputs, [&](const Tensor&) { return pieces[leaf++][k]; }));
  }
  return out;
}

// The tree with every defined Tensor moved to `device` (differentiable).
template <typename T>
T move_to(const T& tree, Device device) {
  return map_tensors(tree, [&](const Tensor& t) { return t.defined() ? t.to(device) : t; });
}

// Joins the replicas' outputs: each tensor is moved to `device` and they are
// concatenated along `dim`; when every replica returned a 0-dim tensor (a
// per-replica loss), they are stacked into a vector of one value per replica
// (as PyTorch's gather).  All undefined gives undefined.  Throws loom::Error
// naming the replica for a mix of defined and undefined, of 0-dim and not,
// or for shapes that do not concatenate along `dim`.
Tensor gather_tensors(const std::vector<Tensor>& outputs, Device device, int64_t dim);

// Joins the replicas' output trees (one per replica, same structure) on
// `device` along `dim`: tensors by gather_tensors, containers element by
// element.  Throws loom::Error when vectors differ in length.
template <typename T>
T gather(const std::vector<T>& outputs, Device device, int64_t dim) {
  return detail::Gather<T>::apply(outputs, device, dim);
}

namespace detail {

// Throws unless every replica's vector has the first one's length.
void check_gather_lengths(const std::vector<size_t>& lengths);

template <>
struct Gather<Tensor> {
  static Tensor apply(const std::vector<Tensor>& outputs, Device device, int64_t dim) {
    return gather_tensors(outputs, device, dim);
  }
};

template <typename T, typename A>
struct Gather<std::vector<T, A>> {
  static std::vector<T, A> apply(const std::vector<std::vector<T, A>>& outputs, Device device,
                                 int64_t dim) {
    std::vector<size_t> lengths;
    for (const auto& v : outputs) lengths.push_back(v.size());
    check_gather_lengths(lengths);
    std::vector<T, A> out;
    for (size_t i = 0; i < outputs.front().size(); ++i) {
      std::vector<T> column;
      for (const auto& v : outputs) column.push_back(v[i]);
      out.push_back(Gather<T>::apply(column, device, dim));
    }
    return out;
  }
};

template <typename... T>
struct Gather<std::tuple<T...>> {
  template <size_t I>
  static auto element(const std::vector<std::tuple<T...>>& outputs, Device device, int64_t dim) {
    using E = std::tuple_element_t<I, std::tuple<T...>>;
    std::vector<E> column;
    for (const auto& t : outputs) column.push_back(std::get<I>(t));
    return Gather<E>::apply(column, device, dim);
  }
  template <size_t... I>
  static std::tuple<T...> apply(const std::vector<std::tuple<T...>>& outputs, Device device,
                                int64_t dim, std::index_sequence<I...>) {
    return std::tuple<T...>{element<I>(outputs, device, dim)...};
  }
  static std::tuple<T...> apply(const std::vector<std::tuple<T...>>& outputs, Device device,
                                int64_t dim) {
    return apply(outputs, device, dim, std::index_sequence_for<T...>{});
  }
};

template <typename A, typename B>
struct Gather<std::pair<A, B>> {
  static std::pair<A, B> apply(const std::vector<std::pair<A, B>>& outputs, Device device,
                               int64_t dim) {
    std::vector<A> firsts;
    std::vector<B> seconds;
    for (const auto& p : outputs) {
      firsts.push_back(p.first);
      seconds.push_back(p.second);
    }
    A first = Gather<A>::apply(firsts, device, dim);
    B second = Gather<B>::apply(seconds, device, dim);
    return {std::move(first), std::move(second)};
  }
};

}  // namespace detail
}  // namespace parallel
}  // namespace nn
}  // namespace loom
