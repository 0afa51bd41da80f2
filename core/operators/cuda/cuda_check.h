// TOMO_CUDA_RETURN_IF_ERROR: the one macro that wraps every CUDA runtime and cuFFT call of
// the CUDA backend (host code, g++ only; never included by a .cu file). A failure returns
// an absl::Status naming the expression, the file and line and the library's error:
//   cudaErrorMemoryAllocation, CUFFT_ALLOC_FAILED -> RESOURCE_EXHAUSTED
//   anything else                                 -> INTERNAL
// Kernel launches are checked by wrapping the Launch... function, which returns
// cudaGetLastError() taken right after the launch.
//
//   TOMO_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, s));
//   TOMO_CUDA_RETURN_IF_ERROR(LaunchParallel2dBack(shape, views, proj, volume, s));
#pragma once

#include <cuda_runtime.h>
#include <cufft.h>

#include <cstring>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"

namespace tomo::core::cuda {

// The project-relative part of a __FILE__ path ("core/operators/cuda/x.cc").
inline const char* ShortFileName(const char* file) {
  const char* best = file;
  for (const char* p = std::strstr(file, "core/"); p != nullptr; p = std::strstr(p + 1, "core/")) {
    best = p;
  }
  return best;
}

inline absl::Status CudaCallStatus(cudaError_t error, const char* expression, const char* file,
                                   int line) {
  if (error == cudaSuccess) return absl::OkStatus();
  std::string message =
      absl::StrCat(expression, " failed at ", ShortFileName(file), ":", line, ": ",
                   cudaGetErrorName(error), " (", cudaGetErrorString(error), ")");
  if (error == cudaErrorMemoryAllocation) return absl::ResourceExhaustedError(message);
  return absl::InternalError(message);
}

inline const char* CufftResultName(cufftResult result) {
  switch (result) {
    case CUFFT_SUCCESS: return "CUFFT_SUCCESS";
    case CUFFT_INVALID_PLAN: return "CUFFT_INVALID_PLAN";
    case CUFFT_ALLOC_FAILED: return "CUFFT_ALLOC_FAILED";
    case CUFFT_INVALID_TYPE: return "CUFFT_INVALID_TYPE";
    case CUFFT_INVALID_VALUE: return "CUFFT_INVALID_VALUE";
    case CUFFT_INTERNAL_ERROR: return "CUFFT_INTERNAL_ERROR";
    case CUFFT_EXEC_FAILED: return "CUFFT_EXEC_FAILED";
    case CUFFT_SETUP_FAILED: return "CUFFT_SETUP_FAILED";
    case CUFFT_INVALID_SIZE: return "CUFFT_INVALID_SIZE";
    case CUFFT_UNALIGNED_DATA: return "CUFFT_UNALIGNED_DATA";
    case CUFFT_INVALID_DEVICE: return "CUFFT_INVALID_DEVICE";
    case CUFFT_NO_WORKSPACE: return "CUFFT_NO_WORKSPACE";
    case CUFFT_NOT_IMPLEMENTED: return "CUFFT_NOT_IMPLEMENTED";
    case CUFFT_NOT_SUPPORTED: return "CUFFT_NOT_SUPPORTED";
    case CUFFT_MISSING_DEPENDENCY: return "CUFFT_MISSING_DEPENDENCY";
    case CUFFT_NVRTC_FAILURE: return "CUFFT_NVRTC_FAILURE";
    case CUFFT_NVJITLINK_FAILURE: return "CUFFT_NVJITLINK_FAILURE";
    case CUFFT_NVSHMEM_FAILURE: return "CUFFT_NVSHMEM_FAILURE";
    default: return "cufftResult (unknown)";
  }
}

inline absl::Status CudaCallStatus(cufftResult result, const char* expression, const char* file,
                                   int line) {
  if (result == CUFFT_SUCCESS) return absl::OkStatus();
  std::string message = absl::StrCat(expression, " failed at ", ShortFileName(file), ":", line,
                                     ": ", CufftResultName(result), " (",
                                     static_cast<int>(result), ")");
  if (result == CUFFT_ALLOC_FAILED) return absl::ResourceExhaustedError(message);
  return absl::InternalError(message);
}

}  // namespace tomo::core::cuda

#define TOMO_CUDA_RETURN_IF_ERROR(expr) \
  TOMO_RETURN_IF_ERROR(::tomo::core::cuda::CudaCallStatus((expr), #expr, __FILE__, __LINE__))
