// Move-only RAII owners of the CUDA backend's device resources (host code, g++ only):
//   ScopedDevice   makes a device current and restores the previous one on exit;
//   Stream         a non-blocking stream;
//   DeviceBuffer   stream-ordered device memory (cudaMallocAsync / cudaFreeAsync): freed in
//                  stream order, so an early error return never frees memory that queued
//                  work still uses;
//   FftPlan        a cuFFT plan.
// and IsPageLocked, whether host memory is page-locked (copies go straight from it).
// Each factory returns absl::StatusOr (see cuda_check.h for the codes). Destructors ignore
// errors (there is nobody to report them to; a broken device shows up at the next call).
// The owner of a resource must keep its device current when destroying it: CudaBackend
// creates and destroys everything inside a ScopedDevice.
//
//   TOMO_ASSIGN_OR_RETURN(ScopedDevice device, ScopedDevice::Enter(0));
//   TOMO_ASSIGN_OR_RETURN(auto buffer, DeviceBuffer<float>::Allocate(n, stream.get()));
#pragma once

#include <cuda_runtime.h>
#include <cufft.h>

#include <cstddef>
#include <cstdint>
#include <utility>

#include "absl/status/statusor.h"
#include "core/base/status_macros.h"
#include "core/operators/cuda/cuda_check.h"
#include "core/operators/cuda/cuda_memory_pool.h"

namespace tomo::core::cuda {

class ScopedDevice {
 public:
  static absl::StatusOr<ScopedDevice> Enter(int device) {
    int previous = 0;
    TOMO_CUDA_RETURN_IF_ERROR(cudaGetDevice(&previous));
    if (previous != device) TOMO_CUDA_RETURN_IF_ERROR(cudaSetDevice(device));
    return ScopedDevice(previous, previous != device);
  }
  ScopedDevice(ScopedDevice&& other) noexcept
      : previous_(other.previous_), restore_(std::exchange(other.restore_, false)) {}
  ScopedDevice& operator=(ScopedDevice&&) = delete;
  ScopedDevice(const ScopedDevice&) = delete;
  ScopedDevice& operator=(const ScopedDevice&) = delete;
  ~ScopedDevice() {
    if (restore_) cudaSetDevice(previous_);
  }

 private:
  ScopedDevice(int previous, bool restore) : previous_(previous), restore_(restore) {}
  int previous_;
  bool restore_;
};

class Stream {
 public:
  Stream() = default;
  static absl::StatusOr<Stream> Create() {
    cudaStream_t stream = nullptr;
    TOMO_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    return Stream(stream);
  }
  Stream(Stream&& other) noexcept : stream_(std::exchange(other.stream_, nullptr)) {}
  Stream& operator=(Stream&& other) noexcept {
    if (this != &other) {
      Reset();
      stream_ = std::exchange(other.stream_, nullptr);
    }
    return *this;
  }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  ~Stream() { Reset(); }

  cudaStream_t get() const { return stream_; }
  void Reset() {
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
    stream_ = nullptr;
  }

 private:
  explicit Stream(cudaStream_t stream) : stream_(stream) {}
  cudaStream_t stream_ = nullptr;
};

// An event for ordering work between streams (no timing). Move-only.
class Event {
 public:
  Event() = default;
  static absl::StatusOr<Event> Create() {
    cudaEvent_t event = nullptr;
    TOMO_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
    return Event(event);
  }
  Event(Event&& other) noexcept : event_(std::exchange(other.event_, nullptr)) {}
  Event& operator=(Event&& other) noexcept {
    if (this != &other) {
      Reset();
      event_ = std::exchange(other.event_, nullptr);
    }
    return *this;
  }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  ~Event() { Reset(); }

  cudaEvent_t get() const { return event_; }
  void Reset() {
    if (event_ != nullptr) cudaEventDestroy(event_);
    event_ = nullptr;
  }

 private:
  explicit Event(cudaEvent_t event) : event_(event) {}
  cudaEvent_t event_ = nullptr;
};

template <typename T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  // count elements of uninitialised device memory, usable by work on `stream` (and by
  // any work ordered after it).
  static absl::StatusOr<DeviceBuffer> Allocate(size_t count, cudaStream_t stream) {
    void* pointer = nullptr;
    if (count > 0) {
      TOMO_CUDA_RETURN_IF_ERROR(cudaMallocAsync(&pointer, count * sizeof(T), stream));
    }
    return DeviceBuffer(static_cast<T*>(pointer), count, stream);
  }
  DeviceBuffer(DeviceBuffer&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)),
        count_(std::exchange(other.count_, 0)),
        stream_(other.stream_) {}
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept {
    if (this != &other) {
      Reset();
      data_ = std::exchange(other.data_, nullptr);
      count_ = std::exchange(other.count_, 0);
      stream_ = other.stream_;
    }
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() { Reset(); }

  T* get() const { return data_; }
  size_t size() const { return count_; }
  size_t size_bytes() const { return count_ * sizeof(T); }
  // Frees in the order of the allocating stream.
  void Reset() {
    if (data_ != nullptr) cudaFreeAsync(data_, stream_);
    data_ = nullptr;
    count_ = 0;
  }

 private:
  DeviceBuffer(T* data, size_t count, cudaStream_t stream)
      : data_(data), count_(count), stream_(stream) {}
  T* data_ = nullptr;
  size_t count_ = 0;
  cudaStream_t stream_ = nullptr;
};

// Page-locked host memory (cudaMallocHost): the copy engines read it at the link's speed,
// where pageable memory goes through the driver's own staging at a fraction of it. Making
// it is slow (the pages are locked one by one), so owners keep it. Move-only.
template <typename T>
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  static absl::StatusOr<PinnedBuffer> Allocate(size_t count) {
    void* pointer = nullptr;
    if (count > 0) TOMO_CUDA_RETURN_IF_ERROR(cudaMallocHost(&pointer, count * sizeof(T)));
    return PinnedBuffer(static_cast<T*>(pointer), count);
  }
  PinnedBuffer(PinnedBuffer&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), count_(std::exchange(other.count_, 0)) {}
  PinnedBuffer& operator=(PinnedBuffer&& other) noexcept {
    if (this != &other) {
      Reset();
      data_ = std::exchange(other.data_, nullptr);
      count_ = std::exchange(other.count_, 0);
    }
    return *this;
  }
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  ~PinnedBuffer() { Reset(); }

  T* get() const { return data_; }
  size_t size() const { return count_; }
  void Reset() {
    if (data_ != nullptr) cudaFreeHost(data_);
    data_ = nullptr;
    count_ = 0;
  }

 private:
  PinnedBuffer(T* data, size_t count) : data_(data), count_(count) {}
  T* data_ = nullptr;
  size_t count_ = 0;
};

// True when every byte of [data, data + bytes) is page-locked host memory (cudaMallocHost,
// or registered with cudaHostRegister: core::PinHostMemory), from which a copy engine reads
// directly and an asynchronous copy really is asynchronous. Looks at the first and the last
// byte (cudaPointerGetAttributes: cudaMemoryTypeHost; pageable memory is
// cudaMemoryTypeUnregistered, device and managed memory other types). A range made of two
// registrations with a pageable gap between would pass: not what the backend's callers
// hand it (an Array3D is registered whole, or not at all). False for no bytes.
inline absl::StatusOr<bool> IsPageLocked(const void* data, size_t bytes) {
  if (data == nullptr || bytes == 0) return false;
  const char* first = static_cast<const char*>(data);
  for (const char* byte : {first, first + bytes - 1}) {
    cudaPointerAttributes attributes{};
    TOMO_CUDA_RETURN_IF_ERROR(cudaPointerGetAttributes(&attributes, byte));
    if (attributes.type != cudaMemoryTypeHost) return false;
  }
  return true;
}

class FftPlan {
 public:
  FftPlan() = default;
  // A batched 1D plan of `type` (CUFFT_R2C or CUFFT_C2R) for `batch` contiguous rows of
  // `length` real samples (length / 2 + 1 complex bins), executing on `stream`.
  static absl::StatusOr<FftPlan> Create1d(int length, int batch, cufftType type,
                                          cudaStream_t stream) {
    cufftHandle handle = 0;
    TOMO_CUDA_RETURN_IF_ERROR(cufftCreate(&handle));
    FftPlan plan(handle);
    int n = length;
    size_t work_bytes = 0;
    // The work area is allocated outside the memory pool (cuda_memory_pool.h).
    TOMO_RETURN_IF_ERROR(WithPoolTrimmedOnExhaustion([&]() -> absl::Status {
      TOMO_CUDA_RETURN_IF_ERROR(cufftMakePlanMany(handle, 1, &n, nullptr, 1, 0, nullptr, 1, 0,
                                                  type, batch, &work_bytes));
      return absl::OkStatus();
    }));
    TOMO_CUDA_RETURN_IF_ERROR(cufftSetStream(handle, stream));
    return plan;
  }
  FftPlan(FftPlan&& other) noexcept
      : handle_(other.handle_), valid_(std::exchange(other.valid_, false)) {}
  FftPlan& operator=(FftPlan&& other) noexcept {
    if (this != &other) {
      Reset();
      handle_ = other.handle_;
      valid_ = std::exchange(other.valid_, false);
    }
    return *this;
  }
  FftPlan(const FftPlan&) = delete;
  FftPlan& operator=(const FftPlan&) = delete;
  ~FftPlan() { Reset(); }

  cufftHandle get() const { return handle_; }
  void Reset() {
    if (valid_) cufftDestroy(handle_);
    valid_ = false;
  }

 private:
  explicit FftPlan(cufftHandle handle) : handle_(handle), valid_(true) {}
  cufftHandle handle_ = 0;
  bool valid_ = false;
};

}  // namespace tomo::core::cuda
