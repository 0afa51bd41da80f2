#include "core/operators/cuda/cuda_memory_pool.h"

#include <cuda_runtime.h>

#include <cstddef>

#include "core/base/status_macros.h"
#include "core/operators/cuda/cuda_check.h"

namespace tomo::core::cuda {
namespace {

absl::StatusOr<cudaMemPool_t> CurrentDefaultPool() {
  int device = 0;
  TOMO_CUDA_RETURN_IF_ERROR(cudaGetDevice(&device));
  cudaMemPool_t pool = nullptr;
  TOMO_CUDA_RETURN_IF_ERROR(cudaDeviceGetDefaultMemPool(&pool, device));
  return pool;
}

}  // namespace

absl::Status KeepFreedDeviceMemory(int device) {
  cudaMemPool_t pool = nullptr;
  TOMO_CUDA_RETURN_IF_ERROR(cudaDeviceGetDefaultMemPool(&pool, device));
  uint64_t keep = UINT64_MAX;
  TOMO_CUDA_RETURN_IF_ERROR(
      cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep));
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> FreeDeviceBytes() {
  size_t free_bytes = 0, total_bytes = 0;
  TOMO_CUDA_RETURN_IF_ERROR(cudaMemGetInfo(&free_bytes, &total_bytes));
  TOMO_ASSIGN_OR_RETURN(cudaMemPool_t pool, CurrentDefaultPool());
  uint64_t reserved = 0, used = 0;
  TOMO_CUDA_RETURN_IF_ERROR(
      cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemCurrent, &reserved));
  TOMO_CUDA_RETURN_IF_ERROR(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemCurrent, &used));
  return static_cast<uint64_t>(free_bytes) + (reserved > used ? reserved - used : 0);
}

absl::Status TrimDeviceMemoryPool() {
  TOMO_ASSIGN_OR_RETURN(cudaMemPool_t pool, CurrentDefaultPool());
  TOMO_CUDA_RETURN_IF_ERROR(cudaMemPoolTrimTo(pool, 0));
  return absl::OkStatus();
}

absl::Status WithPoolTrimmedOnExhaustion(const std::function<absl::Status()>& allocate) {
  absl::Status status = allocate();
  if (!absl::IsResourceExhausted(status)) return status;
  cudaGetLastError();  // the failed allocation's error is reported through `status`
  TOMO_RETURN_IF_ERROR(TrimDeviceMemoryPool());
  return allocate();
}

}  // namespace tomo::core::cuda
