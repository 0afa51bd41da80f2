#include "core/operators/cuda/cuda_page_locked_blocks.h"

#include <cuda_runtime.h>

#include <memory>
#include <mutex>
#include <optional>

#include "core/data/host_block_pool.h"

namespace tomo::core::cuda {
namespace {

// A block's registration, attached to it: ends just before the pool frees the memory.
struct BlockRegistration {
  void* start = nullptr;
  ~BlockRegistration() {
    // Portable: no device needs to be current. Nobody to report an error to.
    if (cudaHostUnregister(start) != cudaSuccess) cudaGetLastError();
  }
};

}  // namespace

bool PageLockReusedBlock(const void* data, size_t bytes) {
  HostBlockPool& pool = HostBlockPool::Get();
  auto holds_range = [&](const std::optional<HostBlock>& block) {
    return block.has_value() && static_cast<const char*>(data) + bytes <=
                                    static_cast<const char*>(block->start) + block->bytes;
  };
  std::optional<HostBlock> block = pool.FindInUse(data);
  if (!holds_range(block) || (!block->attached && block->uses < 2)) return false;
  if (block->attached) return true;
  // One registration at a time: a second thread for the same block finds it attached.
  static std::mutex registering;
  std::lock_guard<std::mutex> lock(registering);
  block = pool.FindInUse(data);
  if (!holds_range(block)) return false;
  if (block->attached) return true;
  // Portable: locked for every device's context, as each device downloads its own slab.
  if (cudaHostRegister(block->start, block->bytes, cudaHostRegisterPortable) != cudaSuccess) {
    cudaGetLastError();  // not sticky: the caller copies through staging
    return false;
  }
  auto registration = std::make_shared<BlockRegistration>();
  registration->start = block->start;
  return pool.Attach(block->start, std::move(registration));
}

}  // namespace tomo::core::cuda
