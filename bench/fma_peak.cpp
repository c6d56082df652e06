// The machine's float32 FMA peak, measured: each of --threads threads runs
// many independent chains of vector FMAs (enough to cover the FMA latency on
// every FMA port) for --seconds, with the widest ISA this CPU has (AVX-512F,
// else AVX2+FMA, detected at run time).  Prints one line:
//   fma_peak isa=<avx512|avx2> threads=<T> gflops=<total> gflops_per_thread=<g>
// bench/cpu_table.sh divides the ResNet steps' achieved GFLOP/s by it.
#include <CLI/CLI.hpp>
#include <immintrin.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>

namespace {

// Every call does iters * kChains vector FMAs of `lanes` floats; returns a
// value that depends on all of them so nothing is optimised away.
constexpr int kChains2 = 12;  // 12 ymm accumulators: >= 2 ports x 5 cycles
constexpr int kChains512 = 24;

__attribute__((target("avx2,fma"))) float fma_avx2(int64_t iters) {
  __m256 acc[kChains2];
  for (int k = 0; k < kChains2; ++k) acc[k] = _mm256_set1_ps(static_cast<float>(k) * 1e-3f);
  const __m256 a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-6f);
  for (int64_t i = 0; i < iters; ++i) {
#pragma GCC unroll 12
    for (int k = 0; k < kChains2; ++k) acc[k] = _mm256_fmadd_ps(acc[k], a, b);
  }
  __m256 s = acc[0];
  for (int k = 1; k < kChains2; ++k) s = _mm256_add_ps(s, acc[k]);
  float out[8];
  _mm256_storeu_ps(out, s);
  return out[0] + out[7];
}

__attribute__((target("avx512f"))) float fma_avx512(int64_t iters) {
  __m512 acc[kChains512];
  for (int k = 0; k < kChains512; ++k) acc[k] = _mm512_set1_ps(static_cast<float>(k) * 1e-3f);
  const __m512 a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-6f);
  for (int64_t i = 0; i < iters; ++i) {
#pragma GCC unroll 24
    for (int k = 0; k < kChains512; ++k) acc[k] = _mm512_fmadd_ps(acc[k], a, b);
  }
  __m512 s = acc[0];
  for (int k = 1; k < kChains512; ++k) s = _mm512_add_ps(s, acc[k]);
  // Summed through memory: GCC 12 warns of an uninitialized value inside
  // _mm512_reduce_add_ps.
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, s);
  float sum = 0.f;
  for (float v : lanes) sum += v;
  return sum;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Measure the float32 FMA peak of this CPU"};
  int threads = 2;
  double seconds = 1.0;
  std::string isa = "auto";
  app.add_option("--threads", threads, "Threads running FMAs at once")->capture_default_str();
  app.add_option("--seconds", seconds, "Length of each of the 3 rounds")->capture_default_str();
  app.add_option("--isa", isa, "auto, avx512 or avx2")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "avx512", "avx2"}));
  CLI11_PARSE(app, argc, argv);
  __builtin_cpu_init();
  const bool has512 = __builtin_cpu_supports("avx512f");
  const bool has2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  if (isa == "auto") isa = has512 ? "avx512" : "avx2";
  if ((isa == "avx512" && !has512) || (isa == "avx2" && !has2)) {
    std::fprintf(stderr, "fma_peak: this CPU has no %s\n", isa.c_str());
    return 2;
  }
  const bool wide = isa == "avx512";
  const double flops_per_iter = (wide ? kChains512 * 16 : kChains2 * 8) * 2.0;
  // Calibrate the iteration count of one thread to about `seconds`.
  int64_t iters = 1 << 20;
  for (;;) {
    const auto t0 = std::chrono::steady_clock::now();
    volatile float sink = wide ? fma_avx512(iters) : fma_avx2(iters);
    (void)sink;
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (s > 0.1) {
      iters = static_cast<int64_t>(static_cast<double>(iters) * seconds / s);
      break;
    }
    iters *= 4;
  }
  double best = 0;
  for (int round = 0; round < 3; ++round) {
    std::atomic<int> ready{0};
    std::atomic<bool> go{false};
    std::vector<double> elapsed(threads);
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) {
      pool.emplace_back([&, t] {
        ++ready;
        while (!go.load()) std::this_thread::yield();
        const auto t0 = std::chrono::steady_clock::now();
        volatile float sink = wide ? fma_avx512(iters) : fma_avx2(iters);
        (void)sink;
        elapsed[t] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      });
    }
    while (ready.load() < threads) std::this_thread::yield();
    go = true;
    for (auto& t : pool) t.join();
    double slowest = 0;
    for (double e : elapsed) slowest = std::max(slowest, e);
    best = std::max(best, threads * static_cast<double>(iters) * flops_per_iter / slowest / 1e9);
  }
  std::printf("fma_peak isa=%s threads=%d gflops=%.1f gflops_per_thread=%.1f\n", isa.c_str(),
              threads, best, best / threads);
  return 0;
}
