// The CUDA emulator's runtime and kernel engine (tools/cuda/emu), on one
// emulated device.
//
// Kernels here are plain C++ launched with loom_emu::launch, which is what
// nvcc_emu.py turns `kernel<<<grid, block, shared, stream>>>(args)` into, and
// use the device built-ins of loom_emu/Device.h.  Checked, with exact values:
//   - the fiber engine: grid-stride loops, thread/block indices of 3-d grids,
//     a block reduction (shuffles, shared memory, barriers) for many block
//     shapes including partial last warps and 2-d/3-d blocks, every shuffle
//     kind and width as the GPU defines them (PTX shfl.sync), lanes that
//     return right after a shuffle, part of a warp shuffling right after the
//     whole warp, __syncthreads_or, threads that return before a barrier, and
//     atomics (within a grid and from two streams at once);
//   - launches: invalid configurations (cudaErrorInvalidConfiguration, nothing
//     runs) and arguments copied at the launch;
//   - streams and events: in-order execution, a kernel spinning on clock64
//     keeps its stream's event not ready while another stream completes,
//     cudaStreamWaitEvent, cudaEventSynchronize / ElapsedTime, and
//     cudaEventDestroy right after a record leaving the stream idle;
//   - memory: cudaMalloc's 0xFF fill, cudaMemGetInfo accounting, the
//     out-of-memory error, pointer attributes, synchronous pageable copies
//     and stream-ordered pinned copies, cudaFree waiting for queued work;
//   - graph capture: recorded not run, replayed by each cudaGraphLaunch, and
//     the capture modes' rules for cudaMalloc (ThreadLocal, Global, Relaxed,
//     other threads).
// The sticky errors of a failed launch (which poison the device for the rest
// of the process) are in runtime_sticky_error_test.cpp; several devices and
// LOOM_CUDA_EMU_MEMORY_MB in runtime_devices_test.cpp.
//
// "Still running" checks hold a stream with a kernel that spins until the
// test releases it (or a 10 s safety timeout), so they need no timing.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "tests/tools/cuda_emu/EmuTestUtil.h"

namespace {

using emu_test::DeviceBuffer;
using emu_test::Stream;
using emu_test::StreamGate;

constexpr long long kCyclesPerMs = 1000000;  // clock64 counts at about 1 GHz
constexpr long long kSpinTimeoutCycles = 10000 * kCyclesPerMs;

template <typename Kernel, typename... Args>
void launch(dim3 grid, dim3 block, cudaStream_t stream, Kernel kernel, Args&&... args) {
  loom_emu::launch(loom_emu::Config(grid, block, 0, stream), kernel, std::forward<Args>(args)...);
}

// ---- kernels -------------------------------------------------------------------------------

__device__ int linear_thread() {
  return static_cast<int>(threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z));
}
__device__ int block_threads() { return static_cast<int>(blockDim.x * blockDim.y * blockDim.z); }
__device__ int linear_block() {
  return static_cast<int>(blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z));
}
__device__ int grid_blocks() { return static_cast<int>(gridDim.x * gridDim.y * gridDim.z); }

__global__ void fill_kernel(float* out, int n, float base) {
  const int stride = static_cast<int>(blockDim.x * gridDim.x);
  for (int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x); i < n; i += stride)
    out[i] = base + static_cast<float>(i);
}

__global__ void iota_kernel(int* out, int n, int scale) {
  const int stride = static_cast<int>(blockDim.x * gridDim.x);
  for (int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x); i < n; i += stride)
    out[i] = scale * i;
}

__global__ void add_kernel(int* data, int n, int value) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) data[i] += value;
}

__global__ void affine_kernel(int* data, int n, int mul, int add) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) data[i] = data[i] * mul + add;
}

__global__ void set_kernel(int* flag, int value) { *flag = value; }

// Spins on clock64 until *release is nonzero and min_cycles have passed;
// gives up after kSpinTimeoutCycles.  *released: 1 if released, 0 if it gave up.
__global__ void spin_kernel(const int* release, long long min_cycles, int* released) {
  const long long start = clock64();
  for (;;) {
    const long long elapsed = clock64() - start;
    if (__atomic_load_n(release, __ATOMIC_ACQUIRE) != 0 && elapsed >= min_cycles) {
      *released = 1;
      return;
    }
    if (elapsed > kSpinTimeoutCycles) {
      *released = 0;
      return;
    }
  }
}

// Where each thread of the grid is.
__global__ void places_kernel(int* place, int* dims) {
  const int at = linear_block() * block_threads() + linear_thread();
  place[at] = static_cast<int>(blockIdx.x + 10 * blockIdx.y + 100 * blockIdx.z +
                               1000 * threadIdx.x + 10000 * threadIdx.y + 100000 * threadIdx.z);
  dims[at] = static_cast<int>(blockDim.x + 10 * blockDim.y + 100 * blockDim.z + 1000 * gridDim.x +
                              10000 * gridDim.y + 100000 * gridDim.z);
}

// Adds in[0, n) into *out: a grid-stride sum per thread, a shuffle tree per
// warp, one partial per warp in shared memory, the first warp sums those,
// one atomicAdd per block.  Any block shape: lanes past the end of a partial
// last warp are left out of its masks.
__global__ void block_sum_kernel(const long long* in, int n, long long* out) {
  __shared__ long long partial[32];
  const int tid = linear_thread(), threads = block_threads();
  long long v = 0;
  for (int i = linear_block() * threads + tid; i < n; i += grid_blocks() * threads) v += in[i];
  const int lane = tid % 32, warp = tid / 32;
  const int lanes = min(32, threads - warp * 32);
  const unsigned mask = lanes == 32 ? 0xffffffffu : (1u << lanes) - 1;
  for (int offset = 16; offset > 0; offset /= 2) {
    const long long other = __shfl_down_sync(mask, v, static_cast<unsigned>(offset));
    if (lane + offset < lanes) v += other;
  }
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  if (warp == 0) {
    const int warps = (threads + 31) / 32;
    v = lane < warps ? partial[lane] : 0;
    for (int offset = 16; offset > 0; offset /= 2) {
      const long long other = __shfl_down_sync(mask, v, static_cast<unsigned>(offset));
      if (lane + offset < lanes) v += other;
    }
    if (lane == 0)
      atomicAdd(reinterpret_cast<unsigned long long*>(out), static_cast<unsigned long long>(v));
  }
}

enum class Shuffle { kXor, kDown, kUp, kIndex };

// Each thread offers 1000 + its index, shuffles once and returns at once.
__global__ void shuffle_kernel(int* out, Shuffle kind, int arg, int width) {
  const int tid = linear_thread();
  const int mine = 1000 + tid;
  int got = 0;
  switch (kind) {
    case Shuffle::kXor: got = __shfl_xor_sync(0xffffffffu, mine, arg, width); break;
    case Shuffle::kDown:
      got = __shfl_down_sync(0xffffffffu, mine, static_cast<unsigned>(arg), width);
      break;
    case Shuffle::kUp:
      got = __shfl_up_sync(0xffffffffu, mine, static_cast<unsigned>(arg), width);
      break;
    case Shuffle::kIndex: got = __shfl_sync(0xffffffffu, mine, arg, width); break;
  }
  out[tid] = got;
}

// Which thread's offer a lane gets, as PTX's shfl.sync defines it (mode,
// source b, clamp c = segment mask and bound) for CUDA's __shfl_*_sync.
int expected_shuffle_source(Shuffle kind, int tid, int arg, int width) {
  const int lane = tid % 32, warp_base = tid - lane;
  const int first = lane & ~(width - 1), last = first + width - 1;
  int j = lane;
  bool valid = true;
  switch (kind) {
    case Shuffle::kXor:
      j = lane ^ (arg & 31);
      valid = j <= last;
      break;
    case Shuffle::kDown:
      j = lane + arg;
      valid = j <= last;
      break;
    case Shuffle::kUp:
      j = lane - arg;
      valid = j >= first;
      break;
    case Shuffle::kIndex: j = first | (arg & (width - 1)); break;
  }
  return warp_base + (valid ? j : lane);
}

// Every lane ends with the warp's total (a butterfly), writes it and returns.
__global__ void butterfly_kernel(const int* in, int* out) {
  const int tid = linear_thread();
  int v = in[tid];
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  out[tid] = v;
}

// The whole warp shuffles, then its lower half shuffles again among itself
// while the upper half returns.
__global__ void half_after_whole_kernel(int* out) {
  const int lane = linear_thread() % 32;
  int v = __shfl_xor_sync(0xffffffffu, 100 + lane, 1);
  if (lane < 16) v = 1000 * v + __shfl_xor_sync(0x0000ffffu, lane, 2);
  out[linear_thread()] = v;
}

// The two halves of a warp shuffle in different branches at the same time.
__global__ void halves_apart_kernel(int* out) {
  const int lane = linear_thread() % 32;
  int v;
  if (lane < 16)
    v = __shfl_xor_sync(0x0000ffffu, 100 + lane, 1);
  else
    v = __shfl_xor_sync(0xffff0000u, 200 + lane, 2);
  out[linear_thread()] = v;
}

// Lanes 20.. return first; the rest shuffle among themselves.
__global__ void after_early_return_kernel(int* out) {
  const int lane = linear_thread() % 32;
  if (lane >= 20) return;
  out[linear_thread()] = __shfl_down_sync(0x000fffffu, 10 * lane, 4);
}

__global__ void shuffle_wide_kernel(const double* d, const long long* l, double* dout,
                                    long long* lout) {
  const int tid = linear_thread();
  dout[tid] = __shfl_xor_sync(0xffffffffu, d[tid], 3);
  lout[tid] = __shfl_sync(0xffffffffu, l[tid], 7);
}

// In a 2-d block (16, 4), lane = threadIdx.x + 16 * (threadIdx.y % 2): xor 16
// pairs row y with row y ^ 1.
__global__ void rows_kernel(int* out) {
  out[linear_thread()] = __shfl_xor_sync(0xffffffffu, static_cast<int>(threadIdx.y), 16);
}

// out[round][thread] = __syncthreads_or(pred[round][thread]).
__global__ void sync_or_kernel(const int* pred, int rounds, int* out) {
  const int tid = linear_thread(), threads = block_threads();
  for (int r = 0; r < rounds; ++r) {
    const int any = __syncthreads_or(pred[r * threads + tid]);
    out[(linear_block() * rounds + r) * threads + tid] = any;
  }
}

// A third of the block returns; the rest meet at a barrier.
__global__ void early_return_kernel(int* out) {
  __shared__ int arrived;
  const int tid = linear_thread();
  if (tid == 0) arrived = 0;
  __syncthreads();
  if (tid % 3 == 0) return;
  atomicAdd(&arrived, 1);
  __syncthreads();
  out[linear_block() * block_threads() + tid] = arrived;
}

struct AtomicsOut {
  int sum;
  unsigned long long usum;
  float fsum;
  double dsum;
  int min;
  int max;
  int cas_max;
  unsigned bits_or;
  unsigned bits_and;
  int exch_count;
};

__device__ int scramble(int i) { return (i * 7919) % 10007; }

__global__ void atomics_kernel(AtomicsOut* o) {
  const int gid = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  atomicAdd(&o->sum, gid % 7 - 3);
  atomicAdd(&o->usum, static_cast<unsigned long long>(gid));
  atomicAdd(&o->fsum, 1.0f);
  atomicAdd(&o->dsum, 0.5);
  atomicMin(&o->min, scramble(gid) + 5);
  atomicMax(&o->max, scramble(gid));
  int old = o->cas_max, assumed;
  do {
    assumed = old;
    old = atomicCAS(&o->cas_max, assumed, max(assumed, scramble(gid)));
  } while (old != assumed);
  atomicOr(&o->bits_or, 1u << (gid % 32));
  atomicAnd(&o->bits_and, ~(1u << (gid % 31)));
  atomicExch(&o->exch_count, gid);
}

__global__ void count_kernel(unsigned long long* counter, int per_thread) {
  for (int i = 0; i < per_thread; ++i) atomicAdd(counter, 1ull);
}

struct Params {
  int values[4];
};

__global__ void params_kernel(Params p, int* out) { out[threadIdx.x] = p.values[threadIdx.x]; }

// Holds a stream with spin_kernel until open().
class KernelGate {
 public:
  KernelGate() {
    void* p = nullptr;
    EXPECT_EQ(cudaSuccess, cudaHostAlloc(&p, 2 * sizeof(int), cudaHostAllocDefault));
    flags_ = static_cast<int*>(p);
    flags_[0] = 0;   // release
    flags_[1] = -1;  // released: -1 until the kernel ends
  }
  KernelGate(const KernelGate&) = delete;
  KernelGate& operator=(const KernelGate&) = delete;
  ~KernelGate() {
    open();
    cudaFreeHost(flags_);  // waits for every stream
  }
  void hold(cudaStream_t stream, double min_ms = 0) {
    launch(1, 1, stream, spin_kernel, flags_, static_cast<long long>(min_ms * kCyclesPerMs),
           flags_ + 1);
  }
  void open() { __atomic_store_n(flags_, 1, __ATOMIC_RELEASE); }
  // After the stream passed the gate: 1 if open() released it (not the timeout).
  int released() const { return __atomic_load_n(flags_ + 1, __ATOMIC_ACQUIRE); }

 private:
  int* flags_ = nullptr;
};

// Opens a gate from another thread after `ms` (for calls that must block
// until it opens); joins that thread when it goes out of scope.
class OpenLater {
 public:
  OpenLater(KernelGate& gate, int ms)
      : thread_([&gate, ms] {
          std::this_thread::sleep_for(std::chrono::milliseconds(ms));
          gate.open();
        }) {}
  OpenLater(const OpenLater&) = delete;
  OpenLater& operator=(const OpenLater&) = delete;
  ~OpenLater() { thread_.join(); }

 private:
  std::thread thread_;
};

// ---- the fiber engine ------------------------------------------------------------------------

TEST(KernelTest, GridStrideFillWritesEveryElementAndNothingPastTheEnd) {
  const int n = 10000;
  Stream s;
  DeviceBuffer<float> d(n + 16);
  launch(3, 128, s, fill_kernel, d.get(), n, 0.5f);
  ASSERT_EQ(cudaSuccess, cudaGetLastError());
  ASSERT_EQ(cudaSuccess, cudaStreamSynchronize(s));
  const std::vector<float> h = d.download();
  for (int i = 0; i < n; ++i) ASSERT_EQ(0.5f + static_cast<float>(i), h[i]) << "element " << i;
  uint32_t tail;
  std::memcpy(&tail, &h[n], sizeof tail);
  EXPECT_EQ(0xFFFFFFFFu, tail) << "the element past the end was written";
}

TEST(KernelTest, ThreadAndBlockIndicesCoverA3dGridExactlyOnce) {
  const dim3 grid(3, 2, 2), block(4, 2, 3);
  const int total = 3 * 2 * 2 * 4 * 2 * 3;
  Stream s;
  DeviceBuffer<int> place(total), dims(total);
  launch(grid, block, s, places_kernel, place.get(), dims.get());
  ASSERT_EQ(cudaSuccess, cudaStreamSynchronize(s));
  const std::vector<int> p = place.download(), d = dims.download();
  int at = 0;
  for (int bz = 0; bz < 2; ++bz)
    for (int by = 0; by < 2; ++by)
      for (int bx = 0; bx < 3; ++bx)
        for (int tz = 0; tz < 3; ++tz)
          for (int ty = 0; ty < 2; ++ty)
            for (int tx = 0; tx < 4; ++tx, ++at) {
              EXPECT_EQ(bx + 10 * by + 100 * bz + 1000 * tx + 10000 * ty + 100000 * tz, p[at]);
              EXPECT_EQ(4 + 10 * 2 + 100 * 3 + 1000 * 3 + 10000 * 2 + 100000 * 2, d[at]);
            }
}

struct SumShape {
  dim3 grid, block;
  const char* name;
};

void PrintTo(const SumShape& shape, std::ostream* os) { *os << shape.name; }

class BlockSumTest : public ::testing::TestWithParam<SumShape> {};

TEST_P(BlockSumTest, ShuffleAndSharedMemoryReductionIsExact) {
  const SumShape& shape = GetParam();
  const int n = 10007;
  std::vector<long long> in(n);
  long long want = 0;
  for (int i = 0; i < n; ++i) {
    in[i] = (static_cast<long long>(i) * 7919) % 2001 - 1000 + (i % 3 == 0 ? (1ll << 33) : 0);
    want += in[i];
  }
  Stream s;
  DeviceBuffer<long long> d(in), out(std::vector<long long>{0});
  launch(shape.grid, shape.block, s, block_sum_kernel, d.get(), n, out.get());
  ASSERT_EQ(cudaSuccess, cudaGetLastError());
  ASSERT_EQ(cudaSuccess, cudaStreamSynchronize(s));
  EXPECT_EQ(want, out.download()[0]);
}

INSTANTIATE_TEST_SUITE_P(
    BlockShapes, BlockSumTest,
    ::testing::Values(SumShape{1, 1, "one_thread"}, SumShape{1, 32, "one_warp"},
                      SumShape{4, 33, "warp_and_one"}, SumShape{3, 100, "partial_last_warp"},
                      SumShape{2, 256, "eight_warps"}, SumShape{2, 1024, "largest_block"},
                      SumShape{dim3(2, 2), dim3(16, 8), "two_d_block"},
                      SumShape{1, dim3(10, 10), "two_d_partial_warp"},
                      SumShape{dim3(2, 1, 2), dim3(7, 5, 3), "three_d_partial_warp"},
                      SumShape{5, 20, "less_than_a_warp"}),
    [](const ::testing::TestParamInfo<SumShape>& info) { return std::string(info.param.name); });

TEST(ShuffleTest, EveryKindWidthAndOffsetReadsTheLaneThePtxRulesName) {
  const int threads = 64;  // two warps: sources never cross into the other warp
  Stream s;
  DeviceBuffer<int> out(threads);
  for (Shuffle kind : {Shuffle::kXor, Shuffle::kDown, Shuffle::kUp, Shuffle::kIndex})
    for (int width : {32, 16, 8, 4, 2, 1})
      for (int arg : {0, 1, 2, 3, 5, 8, 16, 31, -1}) {
        if (arg < 0 && kind != Shuffle::kIndex) continue;
        launch(1, threads, s, shuffle_kernel, out.get(), kind, arg, width);
        ASSERT_EQ(cudaSuccess, cudaStreamSynchronize(s));
        const std::vector<int> got = out.download();
        for (int t = 0; t < threads; ++t)
          ASSERT_EQ(1000 + expected_shuffle_source(kind, t, arg, width), got[t])
              << "kind " << static_cast<int>(kind) << " width " << width << " arg " << arg
              << " thread " << t;
      }
}

TEST(ShuffleTest, LanesReadTheOfferOfALaneThatHasAlreadyReturned) {
  // Lane 31 completes the exchange and returns before lane 30 reads its offer.
  Stream s;
  DeviceBuffer<int> out(32);
  launch(1, 32, s, shuffle_kernel, out.get(), Shuffle::kXor, 1, 32);
  ASSERT_EQ(cudaSuccess, cudaStreamSynchronize(s));
  const std::vector<int> got = out.download();
  for (int lane = 0; lane < 32; ++lane) EXPECT_EQ(1000 + (lane ^ 1), got[lane]) << lane;
}

TEST(ShuffleTest, ButterflySumGivesEveryLaneOfEveryWarpItsTotal) {
  const int threads = 96;
  std::vector<int> in(threads);
  for (int i = 0; i < threads; ++i) in[i] = i * i % 17 - 8;
  Stream s;
  DeviceBuffer<int> d(in), out(threads);
  launch(1, threads, s, butterfly_kernel, d.get(), out.get());
  ASSERT_EQ(cudaSuccess, cudaStreamSynchronize(s));
  const std::vector<int> got = out.download();
  for (int w = 0; w < 3; ++w) {
    int total = 0;
    for (int l = 0; l < 32; ++l) total += in[w * 32 + l];
    for (int l = 0; l < 32; ++l) EXPECT_EQ(total, got[w * 32 + l]) << "warp " << w << " lane " << l;
  }
}

TEST(ShuffleTest, HalfAWarpShufflingRightAfterTheWholeWarpLeavesTheOtherHalfItsValues) {
  Stream s;
  DeviceBuffer<int> out(64);
  launch(1, 64, s, half_after_whole_kernel, out.get());
  ASSERT_EQ(cudaSuccess, cudaStreamSynchronize(s));
  const std::vector<int> got = out.download();
  for (int t = 0; t < 64; ++t) {
    const int lane = t % 32;
    const int whole = 100 + (lane ^ 1);
    EXPECT_EQ(lane < 16 ? 1000 * whole + (lane ^ 2) : whole, got[t]) << "thread " << t;
  }
}

TEST(ShuffleTest, TwoHalvesOfAWarpShufflingInDifferentBranchesStayApart) {
  Stream s;
  DeviceBuffer<int> out(32);
  launch(1, 32, s, halves_apart_kernel, out.get());
  ASSERT_EQ(cudaSuccess, cudaStreamSynchronize(s));
  const std::vector<int> got = out.download();
  for (int lane = 0; lane < 32; ++lane)
    EXPECT_EQ(lane < 16 ? 100 + (lane ^ 1) : 200 + (lane ^ 2), got[lane]) << "lane " << lane;
}

TEST(ShuffleTest, LanesThatReturnedEarlyAreNotWaitedFor) {
  Stream s;
  DeviceBuffer<int> out(32);
  launch(1, 32, s, after_early_return_kernel, out.get());
  ASSERT_EQ(cudaSuccess, cudaStreamSynchronize(s));
  const std::vector<int> got = out.download();
  for (int lane = 0; lane < 20; ++lane)
    EXPECT_EQ(10 * (lane + 4 < 32 && lane + 4 < 20 ? lane + 4 : lane), got[lane]) << lane;
  for (int lane = 20; lane < 32; ++lane) EXPECT_EQ(-1, got[lane]) << "returned lane " << lane;
}

TEST(ShuffleTest, MovesEightByteValues) {
  std::vector<double> d(32);
  std::vector<long long> l(32);
  for (int i = 0; i < 32; ++i) {
    d[i] = 1.0 / (i + 1);
    l[i] = (1ll << 40) + i;
  }
  Stream s;
  DeviceBuffer<double> dd(d), dout(32);
  DeviceBuffer<long long> dl(l), lout(32);
  launch(1, 32, s, shuffle_wide_kernel, dd.get(), dl.get(), dout.get(), lout.get());
  ASSERT_EQ(cudaSuccess, cudaStreamSynchronize(s));
  const std::vector<double> gd = dout.download();
  const std::vector<long long> gl = lout.download();
  for (int i = 0; i < 32; ++i) {
    EXPECT_EQ(d[i ^ 3], gd[i]);
    EXPECT_EQ(l[7], gl[i]);
  }
}

TEST(ShuffleTest, WarpsOfA2dBlockAreConsecutiveLinearThreads) {
  Stream s;
  DeviceBuffer<int> out(64);
  launch(1, dim3(16, 4), s, rows_kernel, out.get());
  ASSERT_EQ(cudaSuccess, cudaStreamSynchronize(s));
  const std::vector<int> got = out.download();
  for (int y = 0; y < 4; ++y)
    for (int x = 0; x < 16; ++x) EXPECT_EQ(y ^ 1, got[x + 16 * y]) << x << ", " << y;
}

TEST(BarrierTest, SyncthreadsOrIsNonzeroExactlyWhenSomeThreadsPredicateIs) {
  const int threads = 100, rounds = 5;
  std::vector<int> pred(rounds * threads, 0);
  pred[1 * threads + threads - 1] = 1;  // round 1: only the last thread (of a partial warp)
  pred[2 * threads + 0] = -7;           // round 2: only thread 0, a negative predicate
  for (int t = 0; t < threads; ++t) pred[3 * threads + t] = 1;  // round 3: everyone
  pred[4 * threads + 50] = 2;                                   // round 4: one in the middle
  Stream s;
  DeviceBuffer<int> p(pred), out(2 * rounds * threads);
  launch(2, threads, s, sync_or_kernel, p.get(), rounds, out.get());
  ASSERT_EQ(cudaSuccess, cudaStreamSynchronize(s));
  const std::vector<int> got = out.download();
  const bool want[rounds] = {false, true, true, true, true};
  for (int b = 0; b < 2; ++b)
    for (int r = 0; r < rounds; ++r)
      for (int t = 0; t < threads; ++t)
        ASSERT_EQ(want[r], got[(b * rounds + r) * threads + t] != 0)
            << "block " << b << " round " << r << " thread " << t;
}

TEST(BarrierTest, ThreadsThatReturnDoNotHoldUpTheBarrier) {
  const int threads = 100;
  Stream s;
  DeviceBuffer<int> out(std::vector<int>(2 * threads, -1));
  launch(2, threads, s, early_return_kernel, out.get());
  ASSERT_EQ(cudaSuccess, cudaStreamSynchronize(s));
  const std::vector<int> got = out.download();
  const int stayed = threads - (threads + 2) / 3;
  for (int i = 0; i < 2 * threads; ++i)
    EXPECT_EQ(i % threads % 3 == 0 ? -1 : stayed, got[i]) << "thread " << i;
}

TEST(AtomicTest, EveryAtomicFromEveryThreadOfManyBlocksIsCounted) {
  const int blocks = 37, threads = 96, n = blocks * threads;
  AtomicsOut init{};
  init.min = 1 << 30;
  init.max = -1;
  init.cas_max = -1;
  init.bits_and = 0xFFFFFFFFu;
  AtomicsOut want = init;
  for (int g = 0; g < n; ++g) {
    const int sc = (g * 7919) % 10007;
    want.sum += g % 7 - 3;
    want.usum += static_cast<unsigned long long>(g);
    want.fsum += 1.0f;
    want.dsum += 0.5;
    want.min = std::min(want.min, sc + 5);
    want.max = std::max(want.max, sc);
    want.bits_or |= 1u << (g % 32);
    want.bits_and &= ~(1u << (g % 31));
  }
  want.cas_max = want.max;
  Stream s;
  DeviceBuffer<AtomicsOut> d(std::vector<AtomicsOut>{init});
  launch(blocks, threads, s, atomics_kernel, d.get());
  ASSERT_EQ(cudaSuccess, cudaStreamSynchronize(s));
  const AtomicsOut got = d.download()[0];
  EXPECT_EQ(want.sum, got.sum);
  EXPECT_EQ(want.usum, got.usum);
  EXPECT_EQ(want.fsum, got.fsum);
  EXPECT_EQ(want.dsum, got.dsum);
  EXPECT_EQ(want.min, got.min);
  EXPECT_EQ(want.max, got.max);
  EXPECT_EQ(want.cas_max, got.cas_max);
  EXPECT_EQ(want.bits_or, got.bits_or);
  EXPECT_EQ(want.bits_and, got.bits_and);
  EXPECT_GE(got.exch_count, 0);
  EXPECT_LT(got.exch_count, n);
}

TEST(AtomicTest, KernelsOnTwoStreamsAddToOneCounterAtomically) {
  Stream a, b;
  DeviceBuffer<unsigned long long> counter(std::vector<unsigned long long>{0});
  for (int i = 0; i < 4; ++i) {
    launch(8, 64, a, count_kernel, counter.get(), 200);
    launch(8, 64, b, count_kernel, counter.get(), 200);
  }
  ASSERT_EQ(cudaSuccess, cudaStreamSynchronize(a));
  ASSERT_EQ(cudaSuccess, cudaStreamSynchronize(b));
  EXPECT_EQ(2ull * 4 * 8 * 64 * 200, counter.download()[0]);
}

// ---- launches --------------------------------------------------------------------------------

TEST(LaunchTest, InvalidConfigurationsSetTheLastErrorAndRunNothing) {
  Stream s;
  DeviceBuffer<int> d(std::vector<int>(64, 5));
  const struct {
    dim3 grid, block;
    size_t shared;
    const char* what;
  } bad[] = {
      {1, 2000, 0, "a block of 2000 threads"},
      {0, 32, 0, "a zero grid"},
      {dim3(1, 0), 32, 0, "a zero grid dimension"},
      {1, 0, 0, "an empty block"},
      {dim3(1, 65536), 32, 0, "grid.y over 65535"},
      {1, dim3(1, 1, 65), 0, "block.z over 64"},
      {1, dim3(32, 33), 0, "1056 threads in two dimensions"},
      {1, 32, 48 * 1024 + 1, "more than 48 KiB of shared memory"},
  };
  for (const auto& c : bad) {
    loom_emu::launch(loom_emu::Config(c.grid, c.block, c.shared, s), add_kernel, d.get(), 64, 1);
    EXPECT_EQ(cudaErrorInvalidConfiguration, cudaPeekAtLastError()) << c.what;
    EXPECT_EQ(cudaErrorInvalidConfiguration, cudaGetLastError()) << c.what;
    EXPECT_EQ(cudaSuccess, cudaGetLastError()) << c.what << ": not sticky";
  }
  ASSERT_EQ(cudaSuccess, cudaStreamSynchronize(s));
  EXPECT_EQ(std::vector<int>(64, 5), d.download()) << "an invalid launch ran";
  // The stream still works.
  launch(1, 64, s, add_kernel, d.get(), 64, 1);
  ASSERT_EQ(cudaSuccess, cudaStreamSynchronize(s));
  EXPECT_EQ(std::vector<int>(64, 6), d.download());
}

TEST(LaunchTest, ArgumentsAreCopiedAtTheLaunch) {
  Stream s;
  DeviceBuffer<int> out(4);
  Params p{{1, 2, 3, 4}};
  {
    StreamGate gate(s);
    launch(1, 4, s, params_kernel, p, out.get());
    p.values[0] = 100;  // too late: the launch copied its arguments
  }
  ASSERT_EQ(cudaSuccess, cudaStreamSynchronize(s));
  EXPECT_EQ(std::vector<int>({1, 2, 3, 4}), out.download());
}

// ---- streams and events ----------------------------------------------------------------------

TEST(StreamTest, WorkOnOneStreamRunsInTheOrderItWasQueued) {
  const int n = 300;
  std::vector<int> want(n);
  for (int i = 0; i < n; ++i) want[i] = 3 * i;
  Stream s;
  DeviceBuffer<int> d(n);
  KernelGate gate;
  gate.hold(s);
  launch(2, 256, s, iota_kernel, d.get(), n, 3);
  for (int round = 0; round < 5; ++round) {
    launch(2, 256, s, affine_kernel, d.get(), n, 2, round);
    launch(3, 128, s, add_kernel, d.get(), n, -1);
    for (int& v : want) v = v * 2 + round - 1;
  }
  EXPECT_EQ(cudaErrorNotReady, cudaStreamQuery(s));
  gate.open();
  ASSERT_EQ(cudaSuccess, cudaStreamSynchronize(s));
  EXPECT_EQ(cudaSuccess, cudaStreamQuery(s));
  EXPECT_EQ(1, gate.released());
  EXPECT_EQ(want, d.download());
}

TEST(StreamTest, ASpinningKernelKeepsItsEventNotReadyWhileAnotherStreamCompletes) {
  const int n = 1000;
  Stream a, b;
  DeviceBuffer<float> d(n);
  cudaEvent_t after_spin = nullptr;
  ASSERT_EQ(cudaSuccess, cudaEventCreateWithFlags(&after_spin, cudaEventDefault));
  KernelGate gate;
  gate.hold(a);
  ASSERT_EQ(cudaSuccess, cudaEventRecord(after_spin, a));
  EXPECT_EQ(cudaErrorNotReady, cudaEventQuery(after_spin));
  EXPECT_EQ(cudaErrorNotReady, cudaStreamQuery(a));
  cudaGetLastError();  // the queries above left cudaErrorNotReady as the last error

  launch(4, 64, b, fill_kernel, d.get(), n, 1.0f);
  ASSERT_EQ(cudaSuccess, cudaStreamSynchronize(b));
  EXPECT_EQ(cudaSuccess, cudaStreamQuery(b));
  const std::vector<float> h = d.download();
  for (int i = 0; i < n; ++i) ASSERT_EQ(1.0f + static_cast<float>(i), h[i]);
  EXPECT_EQ(cudaErrorNotReady, cudaEventQuery(after_spin)) << "stream b's work waited for a";
  EXPECT_EQ(-1, gate.released());

  gate.open();
  ASSERT_EQ(cudaSuccess, cudaEventSynchronize(after_spin));
  EXPECT_EQ(cudaSuccess, cudaEventQuery(after_spin));
  EXPECT_EQ(1, gate.released());
  EXPECT_EQ(cudaSuccess, cudaEventDestroy(after_spin));
}

TEST(StreamTest, StreamWaitEventMakesTheOtherStreamWaitForTheRecordedWork) {
  Stream a, b;
  DeviceBuffer<int> flag(std::vector<int>{0});
  cudaEvent_t e = nullptr, never = nullptr;
  ASSERT_EQ(cudaSuccess, cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  ASSERT_EQ(cudaSuccess, cudaEventCreateWithFlags(&never, cudaEventDisableTiming));
  // An event never recorded is complete: waiting on it holds nothing up.
  ASSERT_EQ(cudaSuccess, cudaStreamWaitEvent(b, never, 0));
  ASSERT_EQ(cudaSuccess, cudaStreamSynchronize(b));

  KernelGate gate;
  gate.hold(a);
  ASSERT_EQ(cudaSuccess, cudaEventRecord(e, a));
  ASSERT_EQ(cudaSuccess, cudaStreamWaitEvent(b, e, 0));
  launch(1, 1, b, set_kernel, flag.get(), 7);
  EXPECT_EQ(cudaErrorNotReady, cudaStreamQuery(b));
  EXPECT_EQ(std::vector<int>{0}, flag.download()) << "b ran past its wait";
  gate.open();
  ASSERT_EQ(cudaSuccess, cudaStreamSynchronize(b));
  EXPECT_EQ(1, gate.released());
  EXPECT_EQ(std::vector<int>{7}, flag.download());
  EXPECT_EQ(cudaSuccess, cudaEventQuery(e)) << "b finished, so a's record has run";
  cudaEventDestroy(e);
  cudaEventDestroy(never);
}

TEST(EventTest, ElapsedTimeMeasuresASpinOfAtLeast200Ms) {
  Stream s;
  cudaEvent_t start = nullptr, stop = nullptr, untimed = nullptr, unrecorded = nullptr;
  ASSERT_EQ(cudaSuccess, cudaEventCreateWithFlags(&start, cudaEventDefault));
  ASSERT_EQ(cudaSuccess, cudaEventCreateWithFlags(&stop, cudaEventBlockingSync));
  ASSERT_EQ(cudaSuccess, cudaEventCreateWithFlags(&untimed, cudaEventDisableTiming));
  ASSERT_EQ(cudaSuccess, cudaEventCreateWithFlags(&unrecorded, cudaEventDefault));
  KernelGate gate;
  ASSERT_EQ(cudaSuccess, cudaEventRecord(start, s));
  gate.hold(s, 200);
  ASSERT_EQ(cudaSuccess, cudaEventRecord(stop, s));
  ASSERT_EQ(cudaSuccess, cudaEventRecord(untimed, s));
  float ms = -1;
  EXPECT_EQ(cudaErrorNotReady, cudaEventElapsedTime(&ms, start, stop));
  gate.open();
  ASSERT_EQ(cudaSuccess, cudaEventSynchronize(stop));
  ASSERT_EQ(cudaSuccess, cudaEventElapsedTime(&ms, start, stop));
  EXPECT_GE(ms, 199.9f);
  EXPECT_LT(ms, 60000.0f);
  EXPECT_EQ(1, gate.released());
  EXPECT_EQ(cudaErrorInvalidResourceHandle, cudaEventElapsedTime(&ms, start, untimed));
  EXPECT_EQ(cudaErrorInvalidResourceHandle, cudaEventElapsedTime(&ms, start, unrecorded));
  cudaGetLastError();
  for (cudaEvent_t e : {start, stop, untimed, unrecorded})
    EXPECT_EQ(cudaSuccess, cudaEventDestroy(e));
}

TEST(EventTest, DestroyingAnEventRightAfterItsRecordLeavesTheStreamIdle) {
  Stream s;
  for (int i = 0; i < 3; ++i) {
    StreamGate gate(s);
    cudaEvent_t e = nullptr;
    ASSERT_EQ(cudaSuccess, cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    ASSERT_EQ(cudaSuccess, cudaEventRecord(e, s));
    ASSERT_EQ(cudaSuccess, cudaEventDestroy(e));  // its record is still queued
    gate.open();
    ASSERT_EQ(cudaSuccess, cudaStreamSynchronize(s));
    EXPECT_EQ(cudaSuccess, cudaStreamQuery(s)) << "round " << i;
  }
  // Recorded and destroyed with nothing ahead of it.
  cudaEvent_t e = nullptr;
  ASSERT_EQ(cudaSuccess, cudaEventCreateWithFlags(&e, cudaEventDefault));
  ASSERT_EQ(cudaSuccess, cudaEventRecord(e, s));
  ASSERT_EQ(cudaSuccess, cudaEventDestroy(e));
  ASSERT_EQ(cudaSuccess, cudaStreamSynchronize(s));
  EXPECT_EQ(cudaSuccess, cudaStreamQuery(s));
}

TEST(StreamTest, DeviceSynchronizeWaitsForEveryStreamOfTheDevice) {
  Stream a, b;
  DeviceBuffer<int> flags(std::vector<int>{0, 0, 0});
  KernelGate gate;
  gate.hold(a);
  launch(1, 1, a, set_kernel, flags.get(), 1);
  launch(1, 1, b, set_kernel, flags.get() + 1, 2);
  launch(1, 1, nullptr, set_kernel, flags.get() + 2, 3);  // the legacy stream
  OpenLater opener(gate, 50);
  EXPECT_EQ(cudaSuccess, cudaDeviceSynchronize());
  EXPECT_EQ(std::vector<int>({1, 2, 3}), flags.download());
  EXPECT_EQ(cudaSuccess, cudaStreamQuery(a));
  EXPECT_EQ(cudaSuccess, cudaStreamQuery(nullptr));
}

// ---- memory ----------------------------------------------------------------------------------

TEST(MemoryTest, CudaMallocFillsNewMemoryWith0xFF) {
  const size_t bytes = 1000;
  void* d = nullptr;
  ASSERT_EQ(cudaSuccess, cudaMalloc(&d, bytes));
  ASSERT_NE(nullptr, d);
  EXPECT_EQ(0u, reinterpret_cast<uintptr_t>(d) % 256) << "device allocations are 256-byte aligned";
  std::vector<unsigned char> h(bytes, 0);
  ASSERT_EQ(cudaSuccess, cudaMemcpy(h.data(), d, bytes, cudaMemcpyDeviceToHost));
  EXPECT_EQ(std::vector<unsigned char>(bytes, 0xFF), h);
  float f;
  std::memcpy(&f, h.data(), sizeof f);
  EXPECT_TRUE(std::isnan(f)) << "unwritten floats read as NaN";
  EXPECT_EQ(cudaSuccess, cudaFree(d));
}

TEST(MemoryTest, MemGetInfoCountsEveryAllocationAndTooLargeAOneFails) {
  size_t free0 = 0, total = 0;
  ASSERT_EQ(cudaSuccess, cudaMemGetInfo(&free0, &total));
  EXPECT_EQ(size_t{8192} << 20, total) << "LOOM_CUDA_EMU_MEMORY_MB's default";
  cudaDeviceProp prop;
  ASSERT_EQ(cudaSuccess, cudaGetDeviceProperties(&prop, 0));
  EXPECT_EQ(total, prop.totalGlobalMem);
  const size_t bytes = (size_t{3} << 20) + 1;
  void* d = nullptr;
  ASSERT_EQ(cudaSuccess, cudaMalloc(&d, bytes));
  size_t free1 = 0;
  ASSERT_EQ(cudaSuccess, cudaMemGetInfo(&free1, &total));
  EXPECT_EQ(free0 - bytes, free1);

  void* big = reinterpret_cast<void*>(0x1234);
  EXPECT_EQ(cudaErrorMemoryAllocation, cudaMalloc(&big, free1 + 1));
  EXPECT_EQ(nullptr, big);
  EXPECT_EQ(cudaErrorMemoryAllocation, cudaGetLastError());
  EXPECT_EQ(cudaSuccess, cudaGetLastError()) << "out of memory is not sticky";
  size_t free2 = 0;
  ASSERT_EQ(cudaSuccess, cudaMemGetInfo(&free2, &total));
  EXPECT_EQ(free1, free2) << "a failed allocation took memory";

  void* empty = reinterpret_cast<void*>(0x1234);
  EXPECT_EQ(cudaSuccess, cudaMalloc(&empty, 0));
  EXPECT_EQ(nullptr, empty);
  ASSERT_EQ(cudaSuccess, cudaFree(d));
  ASSERT_EQ(cudaSuccess, cudaMemGetInfo(&free2, &total));
  EXPECT_EQ(free0, free2);
  EXPECT_EQ(cudaSuccess, cudaFree(nullptr));
}

TEST(MemoryTest, PointerAttributesTellDevicePinnedAndPageableMemoryApart) {
  DeviceBuffer<float> d(256);
  cudaPointerAttributes a;
  ASSERT_EQ(cudaSuccess, cudaPointerGetAttributes(&a, d.get()));
  EXPECT_EQ(cudaMemoryTypeDevice, a.type);
  EXPECT_EQ(0, a.device);
  EXPECT_EQ(d.get(), a.devicePointer);
  EXPECT_EQ(nullptr, a.hostPointer);
  ASSERT_EQ(cudaSuccess, cudaPointerGetAttributes(&a, d.get() + 100));
  EXPECT_EQ(cudaMemoryTypeDevice, a.type) << "a pointer inside an allocation";
  EXPECT_EQ(d.get() + 100, a.devicePointer);

  void* pinned = nullptr;
  ASSERT_EQ(cudaSuccess, cudaHostAlloc(&pinned, 4096, cudaHostAllocDefault));
  ASSERT_EQ(cudaSuccess, cudaPointerGetAttributes(&a, pinned));
  EXPECT_EQ(cudaMemoryTypeHost, a.type);
  EXPECT_EQ(pinned, a.hostPointer);
  EXPECT_EQ(pinned, a.devicePointer);

  std::vector<char> registered(8192);
  ASSERT_EQ(cudaSuccess,
            cudaHostRegister(registered.data(), registered.size(), cudaHostRegisterDefault));
  ASSERT_EQ(cudaSuccess, cudaPointerGetAttributes(&a, registered.data() + 10));
  EXPECT_EQ(cudaMemoryTypeHost, a.type);
  ASSERT_EQ(cudaSuccess, cudaHostUnregister(registered.data()));
  ASSERT_EQ(cudaSuccess, cudaPointerGetAttributes(&a, registered.data() + 10));
  EXPECT_EQ(cudaMemoryTypeUnregistered, a.type);

  int on_stack = 0;
  ASSERT_EQ(cudaSuccess, cudaPointerGetAttributes(&a, &on_stack));
  EXPECT_EQ(cudaMemoryTypeUnregistered, a.type);

  // Each free call takes only its own kind of memory.
  EXPECT_EQ(cudaErrorInvalidValue, cudaFree(pinned));
  EXPECT_EQ(cudaErrorInvalidValue, cudaFreeHost(d.get()));
  EXPECT_EQ(cudaErrorInvalidValue, cudaFree(&on_stack));
  cudaGetLastError();
  EXPECT_EQ(cudaSuccess, cudaFreeHost(pinned));
}

TEST(MemoryTest, CopiesToPageableMemoryWaitForTheStreamsEarlierWork) {
  const int n = 500;
  std::vector<int> host(n, 7);  // outlives the gate, which waits for the stream
  Stream s;
  DeviceBuffer<int> d(n);
  KernelGate gate;
  gate.hold(s);
  launch(2, 128, s, iota_kernel, d.get(), n, 3);
  OpenLater opener(gate, 50);
  // Returns only once the stream has run the kernels before it.
  ASSERT_EQ(cudaSuccess,
            cudaMemcpyAsync(host.data(), d.get(), n * sizeof(int), cudaMemcpyDeviceToHost, s));
  for (int i = 0; i < n; ++i) ASSERT_EQ(3 * i, host[i]) << "element " << i;
  EXPECT_EQ(1, gate.released());
}

TEST(MemoryTest, CopiesBetweenDeviceAndPinnedMemoryAreQueuedOnTheStream) {
  const int n = 500;
  Stream s;
  DeviceBuffer<int> d(n);
  int* pinned = nullptr;
  ASSERT_EQ(cudaSuccess, cudaHostAlloc(reinterpret_cast<void**>(&pinned), n * sizeof(int),
                                       cudaHostAllocDefault));
  for (int i = 0; i < n; ++i) pinned[i] = 7;
  {
    KernelGate gate;
    gate.hold(s);
    launch(2, 128, s, iota_kernel, d.get(), n, 3);
    ASSERT_EQ(cudaSuccess,
              cudaMemcpyAsync(pinned, d.get(), n * sizeof(int), cudaMemcpyDeviceToHost, s));
    for (int i = 0; i < n; ++i) ASSERT_EQ(7, pinned[i]) << "copied before the stream got to it";
    EXPECT_EQ(cudaErrorNotReady, cudaStreamQuery(s));
    gate.open();
    ASSERT_EQ(cudaSuccess, cudaStreamSynchronize(s));
    for (int i = 0; i < n; ++i) ASSERT_EQ(3 * i, pinned[i]);
  }
  {
    // A pinned source is read when the copy runs, not when it is queued.
    StreamGate gate(s);
    ASSERT_EQ(cudaSuccess,
              cudaMemcpyAsync(d.get(), pinned, n * sizeof(int), cudaMemcpyHostToDevice, s));
    ASSERT_EQ(cudaSuccess, cudaMemsetAsync(d.get(), 0, sizeof(int), s));
    for (int i = 0; i < n; ++i) pinned[i] = -i;
    gate.open();
    ASSERT_EQ(cudaSuccess, cudaStreamSynchronize(s));
    const std::vector<int> h = d.download();
    EXPECT_EQ(0, h[0]);
    for (int i = 1; i < n; ++i) ASSERT_EQ(-i, h[i]);
  }
  EXPECT_EQ(cudaSuccess, cudaFreeHost(pinned));
}

TEST(MemoryTest, CudaFreeWaitsForWorkStillQueued) {
  Stream s;
  int* d = nullptr;
  ASSERT_EQ(cudaSuccess, cudaMalloc(reinterpret_cast<void**>(&d), 256 * sizeof(int)));
  DeviceBuffer<int> done(std::vector<int>{0});
  KernelGate gate;
  gate.hold(s);
  launch(1, 256, s, iota_kernel, d, 256, 1);
  launch(1, 1, s, set_kernel, done.get(), 1);
  OpenLater opener(gate, 50);
  ASSERT_EQ(cudaSuccess, cudaFree(d));
  EXPECT_EQ(cudaSuccess, cudaStreamQuery(s));
  EXPECT_EQ(std::vector<int>{1}, done.download());
}

// ---- graph capture ---------------------------------------------------------------------------

TEST(GraphTest, CapturedWorkIsRecordedNotRunAndEachLaunchReplaysIt) {
  const int n = 100;
  Stream s, other;
  DeviceBuffer<int> a(std::vector<int>(n, 0)), b(n);
  cudaStreamCaptureStatus status;
  ASSERT_EQ(cudaSuccess, cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  ASSERT_EQ(cudaSuccess, cudaStreamIsCapturing(s, &status));
  EXPECT_EQ(cudaStreamCaptureStatusActive, status);
  launch(1, 128, s, add_kernel, a.get(), n, 1);
  ASSERT_EQ(cudaSuccess,
            cudaMemcpyAsync(b.get(), a.get(), n * sizeof(int), cudaMemcpyDeviceToDevice, s));
  launch(1, 128, s, add_kernel, a.get(), n, 10);
  ASSERT_EQ(cudaSuccess, cudaMemsetAsync(b.get(), 0, sizeof(int), s));
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaSuccess, cudaStreamEndCapture(s, &graph));
  ASSERT_NE(nullptr, graph);
  ASSERT_EQ(cudaSuccess, cudaStreamIsCapturing(s, &status));
  EXPECT_EQ(cudaStreamCaptureStatusNone, status);
  ASSERT_EQ(cudaSuccess, cudaStreamSynchronize(s));
  EXPECT_EQ(std::vector<int>(n, 0), a.download()) << "captured work ran";
  EXPECT_EQ(std::vector<int>(n, -1), b.download()) << "captured work ran";

  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaSuccess, cudaGraphInstantiate(&exec, graph, 0));
  ASSERT_EQ(cudaSuccess, cudaGraphLaunch(exec, s));
  ASSERT_EQ(cudaSuccess, cudaStreamSynchronize(s));
  std::vector<int> want_b(n, 1);
  want_b[0] = 0;
  EXPECT_EQ(std::vector<int>(n, 11), a.download());
  EXPECT_EQ(want_b, b.download());
  ASSERT_EQ(cudaSuccess, cudaGraphLaunch(exec, s));
  ASSERT_EQ(cudaSuccess, cudaGraphLaunch(exec, s));
  ASSERT_EQ(cudaSuccess, cudaStreamSynchronize(s));
  EXPECT_EQ(std::vector<int>(n, 33), a.download()) << "two launches apply the graph twice";
  std::fill(want_b.begin() + 1, want_b.end(), 23);
  EXPECT_EQ(want_b, b.download());
  // The graph may be launched on another stream, after the graph is destroyed.
  ASSERT_EQ(cudaSuccess, cudaGraphDestroy(graph));
  ASSERT_EQ(cudaSuccess, cudaGraphLaunch(exec, other));
  ASSERT_EQ(cudaSuccess, cudaStreamSynchronize(other));
  EXPECT_EQ(std::vector<int>(n, 44), a.download());
  ASSERT_EQ(cudaSuccess, cudaGraphExecDestroy(exec));
}

TEST(GraphTest, CapturingTheLegacyStreamIsRefused) {
  EXPECT_EQ(cudaErrorStreamCaptureUnsupported,
            cudaStreamBeginCapture(nullptr, cudaStreamCaptureModeGlobal));
  cudaGetLastError();
}

TEST(GraphTest, CudaMallocDuringAGlobalOrThreadLocalCaptureFailsAndInvalidatesIt) {
  const int n = 16;
  DeviceBuffer<int> a(std::vector<int>(n, 0));
  for (cudaStreamCaptureMode mode :
       {cudaStreamCaptureModeGlobal, cudaStreamCaptureModeThreadLocal}) {
    Stream s;
    ASSERT_EQ(cudaSuccess, cudaStreamBeginCapture(s, mode));
    launch(1, 32, s, add_kernel, a.get(), n, 1);
    void* p = nullptr;
    EXPECT_EQ(cudaErrorStreamCaptureUnsupported, cudaMalloc(&p, 256)) << "mode " << mode;
    EXPECT_EQ(cudaErrorStreamCaptureUnsupported, cudaGetLastError());
    cudaStreamCaptureStatus status;
    ASSERT_EQ(cudaSuccess, cudaStreamIsCapturing(s, &status));
    EXPECT_EQ(cudaStreamCaptureStatusInvalidated, status);
    cudaGraph_t graph = reinterpret_cast<cudaGraph_t>(0x1);
    EXPECT_EQ(cudaErrorStreamCaptureInvalidated, cudaStreamEndCapture(s, &graph));
    EXPECT_EQ(nullptr, graph);
    cudaGetLastError();
    ASSERT_EQ(cudaSuccess, cudaStreamIsCapturing(s, &status));
    EXPECT_EQ(cudaStreamCaptureStatusNone, status);
    // Outside a capture cudaMalloc works again.
    ASSERT_EQ(cudaSuccess, cudaMalloc(&p, 256));
    ASSERT_EQ(cudaSuccess, cudaFree(p));
    ASSERT_EQ(cudaSuccess, cudaStreamSynchronize(s));
  }
  EXPECT_EQ(std::vector<int>(n, 0), a.download()) << "work of an invalidated capture ran";
}

TEST(GraphTest, RelaxedModeAllowsCudaMallocDuringACapture) {
  const int n = 16;
  Stream s;
  DeviceBuffer<int> a(std::vector<int>(n, 0));
  ASSERT_EQ(cudaSuccess, cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  launch(1, 32, s, add_kernel, a.get(), n, 2);
  cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  ASSERT_EQ(cudaSuccess, cudaThreadExchangeStreamCaptureMode(&mode));
  EXPECT_EQ(cudaStreamCaptureModeGlobal, mode) << "the thread's previous mode";
  void* p = nullptr;
  EXPECT_EQ(cudaSuccess, cudaMalloc(&p, 256));
  ASSERT_EQ(cudaSuccess, cudaThreadExchangeStreamCaptureMode(&mode));
  EXPECT_EQ(cudaStreamCaptureModeRelaxed, mode);
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaSuccess, cudaStreamEndCapture(s, &graph));
  ASSERT_NE(nullptr, graph);
  ASSERT_EQ(cudaSuccess, cudaFree(p));
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaSuccess, cudaGraphInstantiate(&exec, graph, 0));
  ASSERT_EQ(cudaSuccess, cudaGraphLaunch(exec, s));
  ASSERT_EQ(cudaSuccess, cudaStreamSynchronize(s));
  EXPECT_EQ(std::vector<int>(n, 2), a.download());
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
}

TEST(GraphTest, OnlyAGlobalCaptureForbidsCudaMallocOnOtherThreads) {
  const auto malloc_elsewhere = [](cudaStreamCaptureMode thread_mode) {
    cudaError_t result = cudaErrorInvalidValue;
    std::thread t([&] {
      cudaStreamCaptureMode mode = thread_mode;
      cudaThreadExchangeStreamCaptureMode(&mode);
      void* p = nullptr;
      result = cudaMalloc(&p, 64);
      if (result == cudaSuccess) cudaFree(p);
      cudaGetLastError();
    });
    t.join();
    return result;
  };
  Stream s;
  cudaGraph_t graph = nullptr;
  // A thread-local capture does not concern other threads.
  ASSERT_EQ(cudaSuccess, cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  EXPECT_EQ(cudaSuccess, malloc_elsewhere(cudaStreamCaptureModeGlobal));
  ASSERT_EQ(cudaSuccess, cudaStreamEndCapture(s, &graph));
  cudaGraphDestroy(graph);
  // A relaxed thread may allocate during a global capture elsewhere.
  ASSERT_EQ(cudaSuccess, cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  EXPECT_EQ(cudaSuccess, malloc_elsewhere(cudaStreamCaptureModeRelaxed));
  ASSERT_EQ(cudaSuccess, cudaStreamEndCapture(s, &graph));
  cudaGraphDestroy(graph);
  // A thread in the default (global) mode may not, and breaks the capture.
  ASSERT_EQ(cudaSuccess, cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  EXPECT_EQ(cudaErrorStreamCaptureUnsupported, malloc_elsewhere(cudaStreamCaptureModeGlobal));
  EXPECT_EQ(cudaErrorStreamCaptureInvalidated, cudaStreamEndCapture(s, &graph));
  cudaGetLastError();
}

TEST(GraphTest, WaitingOnACapturingStreamInvalidatesTheCapture) {
  Stream s;
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaSuccess, cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  EXPECT_EQ(cudaErrorStreamCaptureUnsupported, cudaStreamSynchronize(s));
  EXPECT_EQ(cudaErrorStreamCaptureInvalidated, cudaStreamEndCapture(s, &graph));

  ASSERT_EQ(cudaSuccess, cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  EXPECT_EQ(cudaErrorStreamCaptureUnsupported, cudaStreamQuery(s));
  EXPECT_EQ(cudaErrorStreamCaptureInvalidated, cudaStreamEndCapture(s, &graph));

  // A copy to pageable memory would have to wait for the stream.
  DeviceBuffer<int> d(4);
  std::vector<int> host(4);
  ASSERT_EQ(cudaSuccess, cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  EXPECT_EQ(cudaErrorStreamCaptureUnsupported,
            cudaMemcpyAsync(host.data(), d.get(), 4 * sizeof(int), cudaMemcpyDeviceToHost, s));
  EXPECT_EQ(cudaErrorStreamCaptureInvalidated, cudaStreamEndCapture(s, &graph));
  EXPECT_EQ(nullptr, graph);
  cudaGetLastError();
}

// ---- errors and the device -------------------------------------------------------------------

TEST(DeviceTest, OneH100LikeDeviceByDefault) {
  int count = 0, device = -1, version = 0;
  ASSERT_EQ(cudaSuccess, cudaGetDeviceCount(&count));
  EXPECT_EQ(1, count);
  ASSERT_EQ(cudaSuccess, cudaGetDevice(&device));
  EXPECT_EQ(0, device);
  EXPECT_EQ(cudaErrorInvalidDevice, cudaSetDevice(1));
  EXPECT_EQ(cudaErrorInvalidDevice, cudaGetLastError());
  EXPECT_EQ(cudaSuccess, cudaRuntimeGetVersion(&version));
  EXPECT_EQ(CUDART_VERSION, version);
  cudaDeviceProp prop;
  ASSERT_EQ(cudaSuccess, cudaGetDeviceProperties(&prop, 0));
  EXPECT_NE(std::string::npos, std::string(prop.name).find("emulator"));
  EXPECT_EQ(32, prop.warpSize);
  EXPECT_EQ(1024, prop.maxThreadsPerBlock);
  EXPECT_EQ(64, prop.maxThreadsDim[2]);
  EXPECT_EQ(9, prop.major);
  EXPECT_EQ(132, prop.multiProcessorCount);
  int sms = 0;
  ASSERT_EQ(cudaSuccess, cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  EXPECT_EQ(132, sms);
  EXPECT_EQ(cudaErrorInvalidDevice, cudaGetDeviceProperties(&prop, 1));
  cudaGetLastError();
}

TEST(ErrorTest, NamesAndStringsAreCudas) {
  EXPECT_STREQ("cudaSuccess", cudaGetErrorName(cudaSuccess));
  EXPECT_STREQ("cudaErrorInvalidConfiguration", cudaGetErrorName(cudaErrorInvalidConfiguration));
  EXPECT_STREQ("cudaErrorLaunchFailure", cudaGetErrorName(cudaErrorLaunchFailure));
  EXPECT_STREQ("out of memory", cudaGetErrorString(cudaErrorMemoryAllocation));
  EXPECT_STREQ("device not ready", cudaGetErrorString(cudaErrorNotReady));
  EXPECT_STREQ("operation not permitted when stream is capturing",
               cudaGetErrorString(cudaErrorStreamCaptureUnsupported));
}

TEST(ErrorTest, PeekLeavesTheLastErrorAndGetClearsIt) {
  EXPECT_EQ(cudaErrorInvalidDevice, cudaSetDevice(-1));
  EXPECT_EQ(cudaErrorInvalidDevice, cudaPeekAtLastError());
  EXPECT_EQ(cudaErrorInvalidDevice, cudaPeekAtLastError());
  EXPECT_EQ(cudaErrorInvalidDevice, cudaGetLastError());
  EXPECT_EQ(cudaSuccess, cudaGetLastError());
  // The last error is the calling thread's.
  EXPECT_EQ(cudaErrorInvalidDevice, cudaSetDevice(5));
  cudaError_t seen = cudaErrorInvalidValue;
  std::thread([&] { seen = cudaGetLastError(); }).join();
  EXPECT_EQ(cudaSuccess, seen);
  EXPECT_EQ(cudaErrorInvalidDevice, cudaGetLastError());
}

}  // namespace
