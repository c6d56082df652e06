// Multi-tensor launches in chunks, PyTorch's multi_tensor_apply layout (nvcc
// only): a launch takes a list of up to N tensors (their pointers in the
// kernel's arguments) and up to kMaxChunkBlocks blocks, block b covering
// chunk chunk[b] (kChunkElements elements) of tensor tensor[b].  So a list
// of one large and many small tensors launches only the blocks it needs,
// and a tensor too large for one launch continues in the next.  Used by the
// optimizer steps (Optim.cu) and GradScaler's unscale (AmpUnscale.cu).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

namespace loom {
namespace cuda {

constexpr int kMaxChunkBlocks = 320;
constexpr int64_t kChunkElements = 65536;

// Which tensor of the list, and which chunk of it, each block covers
// (1,600 bytes of kernel arguments).
struct ChunkMap {
  unsigned char tensor[kMaxChunkBlocks];
  int chunk[kMaxChunkBlocks];
};

// The elements [begin, end) of tensor `list slot` that this block covers.
struct BlockRange {
  int slot;
  int64_t begin, end;
};
__device__ __forceinline__ BlockRange block_range(const ChunkMap& map, const int64_t* numels) {
  const int slot = map.tensor[blockIdx.x];
  const int64_t begin = static_cast<int64_t>(map.chunk[blockIdx.x]) * kChunkElements;
  const int64_t end = begin + kChunkElements < numels[slot] ? begin + kChunkElements : numels[slot];
  return {slot, begin, end};
}

// Walks `count` tensors (numels[k] elements each, zero-element ones skipped)
// in chunks: place(slot, k) puts tensor k into slot `slot` of the current
// list when it first needs one there; launch(blocks) runs the current list
// with map's first `blocks` entries.  A list holds at most max_tensors
// tensors (<= 256) and kMaxChunkBlocks blocks; the caller's place and launch
// reset nothing, this clears map between lists.
template <typename Place, typename Launch>
void for_each_chunk_list(int count, const int64_t* numels, int max_tensors, ChunkMap& map,
                         const Place& place, const Launch& launch) {
  int tensors = 0, blocks = 0;
  for (int k = 0; k < count; ++k) {
    const int64_t chunks = (numels[k] + kChunkElements - 1) / kChunkElements;
    int slot = -1;  // tensor k's slot in the current list
    for (int64_t c = 0; c < chunks; ++c) {
      if (blocks == kMaxChunkBlocks || (slot < 0 && tensors == max_tensors)) {
        launch(blocks);
        map = ChunkMap{};
        tensors = 0;
        blocks = 0;
        slot = -1;
      }
      if (slot < 0) {
        slot = tensors++;
        place(slot, k);
      }
      map.tensor[blocks] = static_cast<unsigned char>(slot);
      map.chunk[blocks] = static_cast<int>(c);
      ++blocks;
    }
  }
  if (blocks > 0) launch(blocks);
}

}  // namespace cuda
}  // namespace loom
