// The device memory pool behind DeviceBuffer (cudaMallocAsync: the device's default pool),
// kept between calls (host code, g++ only).
//
// Why keep it: by default the pool hands freed memory back to the driver at every stream
// synchronisation, so every FDK call maps its device memory anew (at 1024^3 about 2.7 GB
// per device: the volume, the kept views, the chunk buffers), and the driver maps memory
// for one device at a time: with two devices setting up at once, a call's set-up took
// 19-25 ms instead of 13-14 alone (bench/NOTES.md). Kept, the second call of the same size
// finds its memory in the pool (set-up 2-3 ms on each device at once). A service runs job
// after job on the same devices; what the largest job freed stays with the process.
//
// What that changes for the rest:
// - Free memory is what the driver reports free plus what the pool holds unused
//   (FreeDeviceBytes): the planners and budgets use that, not cudaMemGetInfo alone.
// - Memory that does not come from the pool (texture arrays, cuFFT work areas) may find the
//   driver's free memory held by the pool. The driver hands pool memory back by itself when
//   a plain cudaMalloc would fail (measured on an H200); the backend's other allocations
//   outside the pool go through WithPoolTrimmedOnExhaustion all the same, which retries
//   once after handing the pool's unused memory back.
//
//   TOMO_RETURN_IF_ERROR(KeepFreedDeviceMemory(device));       // once per device
//   TOMO_ASSIGN_OR_RETURN(uint64_t free_bytes, FreeDeviceBytes());  // the current device
#pragma once

#include <cstdint>
#include <functional>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace tomo::core::cuda {

// `device`'s default memory pool keeps what is freed into it (release threshold at its
// maximum) until WithPoolTrimmedOnExhaustion or TrimDeviceMemoryPool hands it back.
absl::Status KeepFreedDeviceMemory(int device);

// The current device's free memory: the driver's free bytes plus the bytes its default pool
// holds but no allocation uses.
absl::StatusOr<uint64_t> FreeDeviceBytes();

// Hands the unused memory of the current device's default pool back to the driver (memory
// in use stays; allocations freed in stream order return to the pool at synchronisation).
absl::Status TrimDeviceMemoryPool();

// Runs `allocate` (an allocation outside the pool, on the current device); when it fails
// with RESOURCE_EXHAUSTED, trims the pool and runs it once more.
absl::Status WithPoolTrimmedOnExhaustion(const std::function<absl::Status()>& allocate);

}  // namespace tomo::core::cuda
