// Generator: a seeded random source for factories, dropout and init.
//
// A process-wide default generator (manual_seed) serves calls that pass none.
// Sequences are reproducible for a seed on every platform (mt19937_64 and
// loom's own transforms, not std:: distributions).
#pragma once

#include <cstdint>
#include <mutex>
#include <random>

namespace loom {

class Generator {
 public:
  explicit Generator(uint64_t seed = 67280421310721ULL) { manual_seed(seed); }
  void manual_seed(uint64_t seed);
  uint64_t seed() const { return seed_; }
  uint64_t next_u64();
  // Uniform in [0, 1) with 53 (double) or 24 (float) random bits.
  double uniform();
  // Standard normal (Box-Muller, caching the second value).
  double normal();
  // Uniform integer in [low, high).
  int64_t randint(int64_t low, int64_t high);
  // Guards draws when one generator is shared between threads.
  std::mutex& mutex() { return mutex_; }

 private:
  uint64_t seed_ = 0;
  std::mt19937_64 engine_;
  bool has_cached_normal_ = false;
  double cached_normal_ = 0;
  std::mutex mutex_;
};

// The process-wide default generator, or this thread's override while a
// GeneratorGuard is alive on it.
Generator& default_generator();

// Makes default_generator() return `gen` on this thread until the end of the
// scope (guards nest).  Used to replay the random draws of a recomputed
// forward (autograd::checkpoint) without touching other threads' draws.
class GeneratorGuard {
 public:
  explicit GeneratorGuard(Generator* gen);
  ~GeneratorGuard();
  GeneratorGuard(const GeneratorGuard&) = delete;
  GeneratorGuard& operator=(const GeneratorGuard&) = delete;

 private:
  Generator* previous_;
};
// Seeds the default generator (torch::manual_seed).
void manual_seed(uint64_t seed);

}  // namespace loom
