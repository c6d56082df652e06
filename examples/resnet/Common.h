// What the ResNet trainers share: their flags, the synthetic data set, the
// device choice and the training loop, so that the single-process trainer
// (train.cpp) and the DDP one (train_ddp.cpp) differ only in how the model is
// wrapped and how the data is split.
//
// The data are the tutorials' RandomClsDS: standard-normal 3 x S x S images
// with random labels among 9 classes (datasets::RandomClassification), so
// the loss does not fall much; the point is the images per second.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "loom.h"

namespace loom {
namespace examples {
namespace resnet {

struct Options {
  int64_t epochs = 1;
  int64_t batch_size = 32;     // images per step (per rank under DDP)
  int64_t steps = 0;           // at most this many steps per epoch; 0: the whole data set
  int64_t image_size = 224;    // images are 3 x image_size x image_size
  int64_t dataset_size = 1024; // synthetic images per epoch (all ranks together)
  int64_t num_classes = 9;
  double lr = 0.01;
  double momentum = 0.9;
  uint64_t seed = 0;
  int threads = 0;             // intra-op threads; 0: OMP_NUM_THREADS or all cores
  int64_t num_workers = 1;     // DataLoader worker threads
  std::string device = "cpu";
  std::string amp;             // --amp: bf16 or fp16 (empty: float32)
  std::string opt_level;       // --opt-level: O0..O3 (default O1 with --amp)
};

// Registers --epochs --batch-size --steps --image-size --dataset-size
// --num-classes --lr --momentum --seed --threads --num-workers --device
// --amp --opt-level.
void add_flags(CLI::App& app, Options& options);

// Checks what CLI11 cannot (image_size >= 32 for ResNet's five
// down-samplings, ...); throws loom::Error naming the flag.
void check(const Options& options);

// The Device for --device: "cuda" means this process's LOCAL_RANK GPU.
// Throws loom::Error with a clear message when CUDA is asked for but no GPU
// is visible (or loom was built without CUDA).
Device resolve_device(const std::string& spec, int local_rank);

// RandomClassification(dataset_size, {3, S, S}, num_classes, seed).
std::shared_ptr<data::Dataset> make_dataset(const Options& options);

// ResNet-18 with options.num_classes outputs (torchvision's layout).
nn::models::ResNet make_model(const Options& options);

// Mixed precision for --amp/--opt-level (amp::initialize over the model and
// its optimizer, before any DDP wrapper), or nothing when neither is given.
// Throws loom::Error for an unknown --amp value or opt level.
std::optional<amp::Amp> make_amp(const Options& options, nn::Module& model, optim::Optimizer& optimizer,
                                  Device device);

struct EpochResult {
  int64_t steps = 0;
  int64_t images = 0;          // images of this process
  double seconds = 0;          // the whole epoch
  double steady_seconds = 0;   // steps 2..N (the first step warms up allocators and buckets)
  int64_t steady_images = 0;   // images of steps 2..N
  double last_loss = 0;
};

// One epoch: for each batch (at most options.steps), loss = cross_entropy(
// forward(images), labels), zero_grad, backward, step; with `mixed`, the
// forward and loss under its autocast and the backward and step through it
// (loss scaling, master weights).  With `verbose`, a progress bar counts
// images * `world_size` (the images of all ranks).
EpochResult train_epoch(const std::function<Tensor(const Tensor&)>& forward, optim::Optimizer& optimizer,
                        data::DataLoader& loader, const Options& options, int64_t epoch, Device device,
                        int world_size, bool verbose, amp::Amp* mixed = nullptr);

// One line on stdout, images/s of all ranks over steps 2..N (when N >= 2):
//   epoch 1/1: 8 steps in 3.2s, loss 2.2467, 412.5 images/s (2 ranks x 206.3) [steps 2-8]
void print_epoch(const EpochResult& result, const Options& options, int64_t epoch, int world_size);

}  // namespace resnet
}  // namespace examples
}  // namespace loom
