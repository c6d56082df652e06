// cuDNN's algorithm choice, for loom's CUDA emulator: the algorithms the
// emulator offers for each convolution pass, cudnnGet*Algorithm_v7 and
// cudnnFind*Algorithm (the ranked lists loom's fallback reads), the
// algorithm counts and the workspace queries.  See CudnnState.h for the rest
// of cuDNN.
#include <algorithm>
#include <string>
#include <vector>

#include "CudnnState.h"

namespace loom_emu {
namespace cudnn {

// ---- algorithms ------------------------------------------------------------------------------

namespace {

// The emulator offers two algorithms per pass (the same loops run for
// both); the first, ranked first, claims a small workspace -- an "index
// table" of 8 bytes per filter tap of one group -- so callers' workspace
// handling is exercised.
struct Offer {
  int algo;
  bool with_table;
  cudnnDeterminism_t determinism;
};

const std::vector<Offer>& offers(Pass pass) {
  static const std::vector<Offer> forward = {
      {CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM, true, CUDNN_DETERMINISTIC},
      {CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, false, CUDNN_DETERMINISTIC}};
  static const std::vector<Offer> data = {
      {CUDNN_CONVOLUTION_BWD_DATA_ALGO_1, true, CUDNN_DETERMINISTIC},
      {CUDNN_CONVOLUTION_BWD_DATA_ALGO_0, false, CUDNN_NON_DETERMINISTIC}};
  static const std::vector<Offer> filter = {
      {CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1, true, CUDNN_DETERMINISTIC},
      {CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0, false, CUDNN_NON_DETERMINISTIC}};
  switch (pass) {
    case Pass::kForward: return forward;
    case Pass::kBackwardData: return data;
    case Pass::kBackwardFilter: return filter;
  }
  return forward;
}

int algo_count(Pass pass) {
  switch (pass) {
    case Pass::kForward: return CUDNN_CONVOLUTION_FWD_ALGO_COUNT;
    case Pass::kBackwardData: return CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT;
    case Pass::kBackwardFilter: return CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT;
  }
  return 0;
}

// Algorithms cuDNN itself documents as non-deterministic.
cudnnDeterminism_t documented_determinism(Pass pass, int algo) {
  if (pass == Pass::kBackwardData && algo == CUDNN_CONVOLUTION_BWD_DATA_ALGO_0)
    return CUDNN_NON_DETERMINISTIC;
  if (pass == Pass::kBackwardFilter &&
      (algo == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0 || algo == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3))
    return CUDNN_NON_DETERMINISTIC;
  return CUDNN_DETERMINISTIC;
}

size_t workspace_bytes(const Offer& o, const Conv& c) {
  if (!o.with_table) return 0;
  return static_cast<size_t>(8 * c.w.d[1] * c.w.d[2] * c.w.d[3]);
}

}  // namespace

// The workspace `algo` needs for this convolution; NOT_SUPPORTED for one the
// emulator does not offer, BAD_PARAM for a value outside the enum.
cudnnStatus_t algo_workspace(const char* fn, Pass pass, int algo, const Conv& c, size_t* bytes) {
  if (algo < 0 || algo >= algo_count(pass))
    return fail(CUDNN_STATUS_BAD_PARAM, fn, "algorithm " + std::to_string(algo) + " is not valid");
  for (const Offer& o : offers(pass))
    if (o.algo == algo) {
      *bytes = workspace_bytes(o, c);
      return CUDNN_STATUS_SUCCESS;
    }
  return fail(CUDNN_STATUS_NOT_SUPPORTED, fn,
              "algorithm " + std::to_string(algo) + " is not emulated (the emulator offers " +
                  std::to_string(offers(pass)[0].algo) + " and " +
                  std::to_string(offers(pass)[1].algo) + ")");
}

namespace {

// Multiply-adds of one pass, for the estimated times cudnnFind* reports.
double madds(const Conv& c) {
  return static_cast<double>(c.y.count()) * static_cast<double>(c.w.d[1] * c.w.d[2] * c.w.d[3]);
}

// Fills a perf list: the offers first, then every other algorithm as
// NOT_SUPPORTED.  `timed`: cudnnFind* (estimated times) rather than the
// heuristics (time -1).
template <typename Perf, typename Algo>
cudnnStatus_t rank(const char* fn, Pass pass, const Conv& c, bool timed, int requested,
                   int* returned, Perf* perf) {
  if (requested < 1 || returned == nullptr || perf == nullptr)
    return fail(CUDNN_STATUS_BAD_PARAM, fn,
                "requestedAlgoCount must be >= 1 and the result pointers non-NULL");
  std::vector<Perf> all;
  const double ms = madds(c) / 1e9;  // about 1 TFLOP/s
  for (size_t i = 0; i < offers(pass).size(); ++i) {
    const Offer& o = offers(pass)[i];
    Perf p{};
    p.algo = static_cast<Algo>(o.algo);
    p.status = CUDNN_STATUS_SUCCESS;
    p.time = timed ? static_cast<float>(ms * (i == 0 ? 0.8 : 1.0)) : -1.0f;
    p.memory = workspace_bytes(o, c);
    p.determinism = o.determinism;
    p.mathType = c.math;
    all.push_back(p);
  }
  for (int a = 0; a < algo_count(pass); ++a) {
    bool offered = false;
    for (const Offer& o : offers(pass)) offered = offered || o.algo == a;
    if (offered) continue;
    Perf p{};
    p.algo = static_cast<Algo>(a);
    p.status = CUDNN_STATUS_NOT_SUPPORTED;
    p.time = -1.0f;
    p.memory = 0;
    p.determinism = documented_determinism(pass, a);
    p.mathType = c.math;
    all.push_back(p);
  }
  const int n = std::min(requested, static_cast<int>(all.size()));
  for (int i = 0; i < n; ++i) perf[i] = all[i];
  *returned = n;
  return CUDNN_STATUS_SUCCESS;
}

// The algorithm and workspace queries of the three passes.
template <typename Perf, typename Algo>
cudnnStatus_t query(const char* fn, Pass pass, bool timed, cudnnHandle_t handle,
                    const cudnnTensorStruct* x, const cudnnFilterStruct* w,
                    const cudnnConvolutionStruct* conv, const cudnnTensorStruct* y, int requested,
                    int* returned, Perf* perf) {
  if (!is_live(handle)) return fail(CUDNN_STATUS_BAD_PARAM, fn, "not a live cuDNN handle");
  Conv c;
  const cudnnStatus_t checked = check_conv(fn, x, w, conv, y, &c);
  if (checked != CUDNN_STATUS_SUCCESS) return checked;
  return rank<Perf, Algo>(fn, pass, c, timed, requested, returned, perf);
}

cudnnStatus_t workspace_query(const char* fn, Pass pass, cudnnHandle_t handle,
                              const cudnnTensorStruct* x, const cudnnFilterStruct* w,
                              const cudnnConvolutionStruct* conv, const cudnnTensorStruct* y,
                              int algo, size_t* bytes) {
  if (!is_live(handle)) return fail(CUDNN_STATUS_BAD_PARAM, fn, "not a live cuDNN handle");
  if (bytes == nullptr) return fail(CUDNN_STATUS_BAD_PARAM, fn, "sizeInBytes is NULL");
  Conv c;
  const cudnnStatus_t checked = check_conv(fn, x, w, conv, y, &c);
  if (checked != CUDNN_STATUS_SUCCESS) return checked;
  return algo_workspace(fn, pass, algo, c, bytes);
}

// The cudnnGet*AlgorithmMaxCount calls: `algorithms` into *count.
cudnnStatus_t max_count(const char* fn, cudnnHandle_t handle, int* count, int algorithms) {
  if (!is_live(handle) || count == nullptr)
    return fail(CUDNN_STATUS_BAD_PARAM, fn, "not a live handle, or count NULL");
  *count = algorithms;
  return CUDNN_STATUS_SUCCESS;
}

}  // namespace

}  // namespace cudnn
}  // namespace loom_emu

using loom_emu::cudnn::max_count;
using loom_emu::cudnn::Pass;
using loom_emu::cudnn::query;
using loom_emu::cudnn::workspace_query;

extern "C" {

// ---- forward -----------------------------------------------------------------------------------

cudnnStatus_t cudnnGetConvolutionForwardAlgorithmMaxCount(cudnnHandle_t handle, int* count) {
  return max_count("cudnnGetConvolutionForwardAlgorithmMaxCount", handle, count,
                   CUDNN_CONVOLUTION_FWD_ALGO_COUNT);
}

cudnnStatus_t cudnnGetConvolutionForwardAlgorithm_v7(
    cudnnHandle_t handle, const cudnnTensorDescriptor_t srcDesc,
    const cudnnFilterDescriptor_t filterDesc, const cudnnConvolutionDescriptor_t convDesc,
    const cudnnTensorDescriptor_t destDesc, const int requestedAlgoCount, int* returnedAlgoCount,
    cudnnConvolutionFwdAlgoPerf_t* perfResults) {
  return query<cudnnConvolutionFwdAlgoPerf_t, cudnnConvolutionFwdAlgo_t>(
      "cudnnGetConvolutionForwardAlgorithm_v7", Pass::kForward, false, handle, srcDesc,
      filterDesc, convDesc, destDesc, requestedAlgoCount, returnedAlgoCount, perfResults);
}

cudnnStatus_t cudnnFindConvolutionForwardAlgorithm(
    cudnnHandle_t handle, const cudnnTensorDescriptor_t xDesc, const cudnnFilterDescriptor_t wDesc,
    const cudnnConvolutionDescriptor_t convDesc, const cudnnTensorDescriptor_t yDesc,
    const int requestedAlgoCount, int* returnedAlgoCount,
    cudnnConvolutionFwdAlgoPerf_t* perfResults) {
  return query<cudnnConvolutionFwdAlgoPerf_t, cudnnConvolutionFwdAlgo_t>(
      "cudnnFindConvolutionForwardAlgorithm", Pass::kForward, true, handle, xDesc, wDesc,
      convDesc, yDesc, requestedAlgoCount, returnedAlgoCount, perfResults);
}

cudnnStatus_t cudnnGetConvolutionForwardWorkspaceSize(
    cudnnHandle_t handle, const cudnnTensorDescriptor_t xDesc, const cudnnFilterDescriptor_t wDesc,
    const cudnnConvolutionDescriptor_t convDesc, const cudnnTensorDescriptor_t yDesc,
    cudnnConvolutionFwdAlgo_t algo, size_t* sizeInBytes) {
  return workspace_query("cudnnGetConvolutionForwardWorkspaceSize", Pass::kForward, handle, xDesc,
                         wDesc, convDesc, yDesc, algo, sizeInBytes);
}

// ---- backward data -----------------------------------------------------------------------------

cudnnStatus_t cudnnGetConvolutionBackwardDataAlgorithmMaxCount(cudnnHandle_t handle, int* count) {
  return max_count("cudnnGetConvolutionBackwardDataAlgorithmMaxCount", handle, count,
                   CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT);
}

cudnnStatus_t cudnnGetConvolutionBackwardDataAlgorithm_v7(
    cudnnHandle_t handle, const cudnnFilterDescriptor_t filterDesc,
    const cudnnTensorDescriptor_t diffDesc, const cudnnConvolutionDescriptor_t convDesc,
    const cudnnTensorDescriptor_t gradDesc, const int requestedAlgoCount, int* returnedAlgoCount,
    cudnnConvolutionBwdDataAlgoPerf_t* perfResults) {
  return query<cudnnConvolutionBwdDataAlgoPerf_t, cudnnConvolutionBwdDataAlgo_t>(
      "cudnnGetConvolutionBackwardDataAlgorithm_v7", Pass::kBackwardData, false, handle, gradDesc,
      filterDesc, convDesc, diffDesc, requestedAlgoCount, returnedAlgoCount, perfResults);
}

cudnnStatus_t cudnnFindConvolutionBackwardDataAlgorithm(
    cudnnHandle_t handle, const cudnnFilterDescriptor_t wDesc,
    const cudnnTensorDescriptor_t dyDesc, const cudnnConvolutionDescriptor_t convDesc,
    const cudnnTensorDescriptor_t dxDesc, const int requestedAlgoCount, int* returnedAlgoCount,
    cudnnConvolutionBwdDataAlgoPerf_t* perfResults) {
  return query<cudnnConvolutionBwdDataAlgoPerf_t, cudnnConvolutionBwdDataAlgo_t>(
      "cudnnFindConvolutionBackwardDataAlgorithm", Pass::kBackwardData, true, handle, dxDesc,
      wDesc, convDesc, dyDesc, requestedAlgoCount, returnedAlgoCount, perfResults);
}

cudnnStatus_t cudnnGetConvolutionBackwardDataWorkspaceSize(
    cudnnHandle_t handle, const cudnnFilterDescriptor_t wDesc,
    const cudnnTensorDescriptor_t dyDesc, const cudnnConvolutionDescriptor_t convDesc,
    const cudnnTensorDescriptor_t dxDesc, cudnnConvolutionBwdDataAlgo_t algo,
    size_t* sizeInBytes) {
  return workspace_query("cudnnGetConvolutionBackwardDataWorkspaceSize", Pass::kBackwardData,
                         handle, dxDesc, wDesc, convDesc, dyDesc, algo, sizeInBytes);
}

// ---- backward filter ---------------------------------------------------------------------------

cudnnStatus_t cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(cudnnHandle_t handle,
                                                                  int* count) {
  return max_count("cudnnGetConvolutionBackwardFilterAlgorithmMaxCount", handle, count,
                   CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT);
}

cudnnStatus_t cudnnGetConvolutionBackwardFilterAlgorithm_v7(
    cudnnHandle_t handle, const cudnnTensorDescriptor_t srcDesc,
    const cudnnTensorDescriptor_t diffDesc, const cudnnConvolutionDescriptor_t convDesc,
    const cudnnFilterDescriptor_t gradDesc, const int requestedAlgoCount, int* returnedAlgoCount,
    cudnnConvolutionBwdFilterAlgoPerf_t* perfResults) {
  return query<cudnnConvolutionBwdFilterAlgoPerf_t, cudnnConvolutionBwdFilterAlgo_t>(
      "cudnnGetConvolutionBackwardFilterAlgorithm_v7", Pass::kBackwardFilter, false, handle,
      srcDesc, gradDesc, convDesc, diffDesc, requestedAlgoCount, returnedAlgoCount, perfResults);
}

cudnnStatus_t cudnnFindConvolutionBackwardFilterAlgorithm(
    cudnnHandle_t handle, const cudnnTensorDescriptor_t xDesc,
    const cudnnTensorDescriptor_t dyDesc, const cudnnConvolutionDescriptor_t convDesc,
    const cudnnFilterDescriptor_t dwDesc, const int requestedAlgoCount, int* returnedAlgoCount,
    cudnnConvolutionBwdFilterAlgoPerf_t* perfResults) {
  return query<cudnnConvolutionBwdFilterAlgoPerf_t, cudnnConvolutionBwdFilterAlgo_t>(
      "cudnnFindConvolutionBackwardFilterAlgorithm", Pass::kBackwardFilter, true, handle, xDesc,
      dwDesc, convDesc, dyDesc, requestedAlgoCount, returnedAlgoCount, perfResults);
}

cudnnStatus_t cudnnGetConvolutionBackwardFilterWorkspaceSize(
    cudnnHandle_t handle, const cudnnTensorDescriptor_t xDesc,
    const cudnnTensorDescriptor_t dyDesc, const cudnnConvolutionDescriptor_t convDesc,
    const cudnnFilterDescriptor_t gradDesc, cudnnConvolutionBwdFilterAlgo_t algo,
    size_t* sizeInBytes) {
  return workspace_query("cudnnGetConvolutionBackwardFilterWorkspaceSize", Pass::kBackwardFilter,
                         handle, xDesc, gradDesc, convDesc, dyDesc, algo, sizeInBytes);
}

}  // extern "C"
