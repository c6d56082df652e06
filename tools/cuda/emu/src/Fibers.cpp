// Fibers for the threads of one block (see Fibers.h).
//
// Each CUDA thread gets a fiber: its own 64 KiB stack (with a guard page
// below it) and a saved stack pointer.  The scheduler resumes the block's
// unfinished fibers in order, round after round; a fiber runs until it
// returns or waits at a barrier.  A barrier releases when every thread that
// has not returned has arrived (__syncthreads) or every live lane of the
// mask has (the warp operations); a round in which no fiber finished,
// arrived or was released is a deadlock.
//
// The switch is a few instructions of x86-64 assembly (callee-saved
// registers, MXCSR and the x87 control word): ucontext's swapcontext makes
// a signal-mask system call per switch, far too slow for millions of them.
#include "Fibers.h"

#include <signal.h>
#include <sys/mman.h>

#include <cstdint>
#include <cstdio>
#include <exception>
#include <stdexcept>
#include <string>
#include <vector>

#if !defined(__x86_64__)
#error "loom's CUDA emulator switches fibers with x86-64 assembly"
#endif

extern "C" {
// Saves the running context's stack pointer in *save and continues the one
// whose stack pointer is `load`.
void loom_emu_switch(void** save, void* load);
// The first code a fiber runs: calls loom_emu_fiber_main(r12).
void loom_emu_fiber_start();
void loom_emu_fiber_main(void* fiber);
}

asm(R"(
  .pushsection .text
  .globl loom_emu_switch
  .type loom_emu_switch, @function
loom_emu_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  subq $16, %rsp
  stmxcsr 8(%rsp)
  fnstcw (%rsp)
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  ldmxcsr 8(%rsp)
  fldcw (%rsp)
  addq $16, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size loom_emu_switch, .-loom_emu_switch

  .globl loom_emu_fiber_start
  .type loom_emu_fiber_start, @function
loom_emu_fiber_start:
  .cfi_startproc
  .cfi_undefined rip
  movq %r12, %rdi
  call loom_emu_fiber_main
  ud2
  .cfi_endproc
  .size loom_emu_fiber_start, .-loom_emu_fiber_start
  .popsection
)");

namespace loom_emu {
namespace {

constexpr size_t kStackBytes = 64 * 1024;
constexpr size_t kGuardBytes = 4096;

// One fiber's stack, mapped once per host thread and reused by every block.
struct Stack {
  char* base = nullptr;  // the guard page; usable memory starts kGuardBytes above
  Stack() {
    void* p = mmap(nullptr, kStackBytes + kGuardBytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) throw std::runtime_error("CUDA emulator: cannot map a fiber stack");
    base = static_cast<char*>(p);
    mprotect(base, kGuardBytes, PROT_NONE);
  }
  char* top() const { return base + kGuardBytes + kStackBytes; }
};

struct Fiber {
  void* sp = nullptr;
  bool done = false;
  int linear = 0;  // threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z)
  ThreadPlace place{};
};

// A warp's exchanges.  Each waiting lane keeps its own mask, offer and
// source, and gets its own answer when its exchange completes, so lanes of
// one warp may be in different exchanges at once (divergent branches with
// disjoint masks), and a lane that has not yet picked up its answer keeps it
// while other lanes go on to their next exchange.
struct Warp {
  uint32_t live = 0;      // lanes that have not returned
  uint32_t waiting = 0;   // lanes waiting in an exchange
  uint32_t answered = 0;  // lanes whose exchange completed, answer not yet picked up
  uint32_t mask[32] = {};
  int source[32] = {};
  uint64_t offered[32] = {};
  uint64_t answer[32] = {};
};

struct Block {
  std::vector<Fiber> fibers;
  std::vector<Warp> warps;
  void* scheduler_sp = nullptr;
  Fiber* current = nullptr;
  const std::function<void()>* body = nullptr;
  const char* file = nullptr;  // where the kernel was launched
  int line = 0;
  int live = 0;
  int arrived = 0;
  int or_value = 0;
  int or_result = 0;
  uint64_t generation = 0;
  uint64_t progress = 0;  // events that can unblock a deadlock check
  std::exception_ptr error;
};

thread_local Block* t_block = nullptr;
thread_local std::vector<Stack>* t_stacks = nullptr;

std::vector<Stack>& stacks(size_t n) {
  if (t_stacks == nullptr) t_stacks = new std::vector<Stack>();  // kept for the thread's life
  while (t_stacks->size() < n) t_stacks->emplace_back();
  return *t_stacks;
}

void yield() {
  Block* b = t_block;
  loom_emu_switch(&b->current->sp, b->scheduler_sp);
}

void release_block_barrier(Block* b) {
  b->or_result = b->or_value;
  b->or_value = 0;
  b->arrived = 0;
  ++b->generation;
  ++b->progress;
}

// Completes the exchange `lane` waits in once every live lane of its mask
// waits too: each of those lanes gets the offer of its source lane if that
// lane is one of them (a lane that returns after offering still gave its
// offer), else its own.
void try_release_warp(Block* b, Warp& w, int lane) {
  const uint32_t group = w.mask[lane] & w.live;
  if ((w.waiting & group) != group) return;
  for (int l = 0; l < 32; ++l) {
    if (!((group >> l) & 1u)) continue;
    const int s = w.source[l];
    const bool present = s >= 0 && s < 32 && ((group >> s) & 1u);
    w.answer[l] = present ? w.offered[s] : w.offered[l];
  }
  w.waiting &= ~group;
  w.answered |= group;
  ++b->progress;
}

// A fresh fiber's stack: what loom_emu_switch pops (x87 control word, MXCSR,
// r15..rbp) and then returns into loom_emu_fiber_start, which finds the
// fiber in r12.  After that return the stack pointer is 16-byte aligned, as
// the call in loom_emu_fiber_start needs.
void* prepare_stack(char* top, Fiber* fiber) {
  uint64_t* sp = reinterpret_cast<uint64_t*>(top - 88);
  uint16_t fpcw = 0;
  uint32_t mxcsr = 0;
  asm volatile("fnstcw %0" : "=m"(fpcw));
  asm volatile("stmxcsr %0" : "=m"(mxcsr));
  sp[0] = fpcw;
  sp[1] = mxcsr;
  sp[2] = 0;                                         // r15
  sp[3] = 0;                                         // r14
  sp[4] = 0;                                         // r13
  sp[5] = reinterpret_cast<uint64_t>(fiber);         // r12
  sp[6] = 0;                                         // rbx
  sp[7] = 0;                                         // rbp
  sp[8] = reinterpret_cast<uint64_t>(&loom_emu_fiber_start);
  return sp;
}

void run_block(Block& b, dim3 grid, dim3 block, uint3 block_idx) {
  const int n = static_cast<int>(block.x * block.y * block.z);
  std::vector<Stack>& pool = stacks(static_cast<size_t>(n));
  b.fibers.assign(static_cast<size_t>(n), Fiber());
  b.warps.assign(static_cast<size_t>((n + 31) / 32), Warp());
  for (int i = 0; i < n; ++i) {
    Fiber& f = b.fibers[static_cast<size_t>(i)];
    f.linear = i;
    const unsigned x = static_cast<unsigned>(i) % block.x;
    const unsigned y = (static_cast<unsigned>(i) / block.x) % block.y;
    const unsigned z = static_cast<unsigned>(i) / (block.x * block.y);
    f.place = ThreadPlace{uint3{x, y, z}, block_idx, block, grid};
    f.sp = prepare_stack(pool[static_cast<size_t>(i)].top(), &f);
    b.warps[static_cast<size_t>(i / 32)].live |= 1u << (i % 32);
  }
  b.live = n;
  b.arrived = 0;
  b.or_value = 0;
  b.generation = 0;
  while (b.live > 0) {
    const uint64_t before = b.progress;
    for (Fiber& f : b.fibers) {
      if (f.done) continue;
      b.current = &f;
      loom_emu_switch(&b.scheduler_sp, f.sp);
    }
    b.current = nullptr;
    if (b.live > 0 && b.progress == before) {
      int in_warp_operations = 0;
      for (const Warp& w : b.warps) in_warp_operations += __builtin_popcount(w.waiting);
      char where[200];
      std::snprintf(where, sizeof(where),
                    "block (%u, %u, %u): of its %d threads, %d wait at __syncthreads and %d at "
                    "warp operations (shuffles, __syncwarp) that the others never reach",
                    block_idx.x, block_idx.y, block_idx.z, n, b.arrived, in_warp_operations);
      throw std::runtime_error(std::string("CUDA emulator: kernel deadlock in ") + where);
    }
  }
}

}  // namespace

const ThreadPlace& place() { return t_block->current->place; }

int lane_id() { return t_block->current->linear % 32; }

int block_barrier(int value) {
  Block* b = t_block;
  const uint64_t generation = b->generation;
  b->or_value |= value;
  ++b->arrived;
  ++b->progress;
  if (b->arrived == b->live) {
    release_block_barrier(b);
  } else {
    while (b->generation == generation) yield();
  }
  return b->or_result;
}

uint64_t warp_exchange(unsigned mask, uint64_t bits, int source) {
  Block* b = t_block;
  const int linear = b->current->linear;
  Warp& w = b->warps[static_cast<size_t>(linear / 32)];
  const int lane = linear % 32;
  const uint32_t me = 1u << lane;
  w.mask[lane] = mask | me;
  w.source[lane] = source;
  w.offered[lane] = bits;
  w.waiting |= me;
  ++b->progress;
  try_release_warp(b, w, lane);
  while (!(w.answered & me)) {
    yield();
    if (w.waiting & me) try_release_warp(b, w, lane);  // a lane of the mask may have returned
  }
  w.answered &= ~me;
  return w.answer[lane];
}

void run_grid(dim3 grid, dim3 block, const std::function<void()>& body, const char* file,
              int line) {
  // An alternate signal stack, so a fault report (Runtime.cpp) can run
  // even when a fiber overflowed its own stack into the guard page.
  static thread_local const bool alternate_stack = [] {
    stack_t ss{};
    ss.ss_size = 64 * 1024;
    ss.ss_sp = mmap(nullptr, ss.ss_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                    -1, 0);
    return ss.ss_sp != MAP_FAILED && sigaltstack(&ss, nullptr) == 0;
  }();
  (void)alternate_stack;
  Block b;
  b.body = &body;
  b.file = file;
  b.line = line;
  Block* outer = t_block;
  t_block = &b;
  try {
    for (unsigned z = 0; z < grid.z; ++z)
      for (unsigned y = 0; y < grid.y; ++y)
        for (unsigned x = 0; x < grid.x; ++x) {
          run_block(b, grid, block, uint3{x, y, z});
          if (b.error) std::rethrow_exception(b.error);
        }
  } catch (...) {
    t_block = outer;
    throw;
  }
  t_block = outer;
}

bool describe_running_thread(char* buf, size_t size) {
  const Block* b = t_block;
  if (b == nullptr || b->current == nullptr) return false;
  const ThreadPlace& p = b->current->place;
  std::snprintf(buf, size,
                "the kernel launched at %s:%d, block (%u, %u, %u), thread (%u, %u, %u)",
                b->file ? b->file : "?", b->line, p.block_idx.x, p.block_idx.y,
                p.block_idx.z, p.thread_idx.x, p.thread_idx.y, p.thread_idx.z);
  return true;
}

}  // namespace loom_emu

extern "C" void loom_emu_fiber_main(void* fiber) {
  using namespace loom_emu;
  Fiber* f = static_cast<Fiber*>(fiber);
  Block* b = t_block;
  try {
    (*b->body)();
  } catch (...) {
    if (!b->error) b->error = std::current_exception();
  }
  f->done = true;
  --b->live;
  ++b->progress;
  // A thread that returns no longer holds up its block's barrier or its
  // warp's exchanges.
  if (b->arrived > 0 && b->arrived == b->live) release_block_barrier(b);
  Warp& w = b->warps[static_cast<size_t>(f->linear / 32)];
  w.live &= ~(1u << (f->linear % 32));
  void* unused = nullptr;
  loom_emu_switch(&unused, b->scheduler_sp);
  __builtin_unreachable();
}
