// Inside the CUDA backend (host code, g++ only): the VectorGeometry projectors on data that
// already live on the device, for the host-array projectors (cuda_host_projector.h, which
// add the host copies), the resident operators, the filtered back projection and for
// bench/tomo_bench.cc (which times them GPU-resident). Not for users of the core: they go
// through Backend (core/operators/backend.h).
//
// DeviceVectorProjector holds, for one (VectorGeometry, VolumeGeometry) pair on one device
// and stream: the per-view kernel parameters (computed on the host in double, uploaded
// once) and, made on first use and kept, the CUDA arrays and texture objects the texture
// samplers read (for the forward projector a 3D array of the volume, or three layered 2D
// arrays with their transpose scratch; for the back projector a layered 2D array of at most
// kMaxTextureLayers views, float32 or float16; layered 1D for one-row 2D geometries). Every method enqueues work on
// the stream and returns without synchronising; errors are absl::Status as in
// cuda_check.h. The caller keeps the device current (ScopedDevice) for every call and for
// the destructor. Not thread-safe.
//
//   TOMO_ASSIGN_OR_RETURN(auto projector,
//                         DeviceVectorProjector::Create(geometry, volume_geometry, stream));
//   TOMO_RETURN_IF_ERROR(projector.Forward(d_volume, d_projections, VectorSampler::kTexture));
//   TOMO_RETURN_IF_ERROR(projector.Back(d_projections, BackProjectionWeighting::kFdk,
//                                       d_volume, VectorSampler::kTexture));
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/geometry/vector_geometry.h"
#include "core/geometry/volume_geometry.h"
#include "core/operators/backend.h"
#include "core/operators/cuda/cuda_resources.h"
#include "core/operators/cuda/vector_kernels.h"

namespace tomo::core::cuda {

// Layers of a layered 2D texture on every current CUDA device (cudaDeviceProp
// maxTexture2DLayered[2] is 2048 on Hopper).
constexpr int64_t kMaxTextureLayers = 2048;

// The kernels' per-view parameters (vector_kernels.h), computed in double.
std::vector<VectorFpView> MakeVectorFpViews(const VectorGeometry& geometry,
                                            const VolumeGeometry& volume_geometry);
std::vector<VectorBpView> MakeVectorBpViews(const VectorGeometry& geometry,
                                            const VolumeGeometry& volume_geometry);

// A CUDA array with a texture object reading it: linear filtering, border addressing
// (outside reads 0), unnormalised coordinates. Move-only.
class TextureArray {
 public:
  TextureArray() = default;
  // A 3D array of (width, height, depth) floats; layered: depth is the number of layers of
  // a layered 2D texture (height 0 with layered: a layered 1D texture of `depth` layers).
  // half: IEEE binary16 elements (read as float by the kernels).
  static absl::StatusOr<TextureArray> Create(int64_t width, int64_t height, int64_t depth,
                                             bool layered, bool half = false);
  TextureArray(TextureArray&& other) noexcept
      : array_(std::exchange(other.array_, nullptr)),
        texture_(std::exchange(other.texture_, 0)),
        width_(other.width_), height_(other.height_), depth_(other.depth_),
        element_bytes_(other.element_bytes_) {}
  TextureArray& operator=(TextureArray&& other) noexcept {
    if (this != &other) {
      Reset();
      array_ = std::exchange(other.array_, nullptr);
      texture_ = std::exchange(other.texture_, 0);
      width_ = other.width_;
      height_ = other.height_;
      depth_ = other.depth_;
      element_bytes_ = other.element_bytes_;
    }
    return *this;
  }
  TextureArray(const TextureArray&) = delete;
  TextureArray& operator=(const TextureArray&) = delete;
  ~TextureArray() { Reset(); }

  // Copies `depth` slices of width x height elements (contiguous, from host or device
  // memory, `kind` says which) into slices [first, first + depth) of the array, on `stream`.
  absl::Status Load(const void* source, int64_t first, int64_t depth, cudaMemcpyKind kind,
                    cudaStream_t stream) const;
  bool half() const { return element_bytes_ == 2; }

  cudaTextureObject_t texture() const { return texture_; }
  bool valid() const { return array_ != nullptr; }
  int64_t width() const { return width_; }
  int64_t height() const { return height_; }
  int64_t depth() const { return depth_; }
  void Reset();

 private:
  cudaArray_t array_ = nullptr;
  cudaTextureObject_t texture_ = 0;
  int64_t width_ = 0, height_ = 0, depth_ = 0;
  int64_t element_bytes_ = 4;
};

class DeviceVectorProjector {
 public:
  // INVALID_ARGUMENT for sizes beyond the kernels' int32 indexing.
  static absl::StatusOr<DeviceVectorProjector> Create(const VectorGeometry& geometry,
                                                      const VolumeGeometry& volume_geometry,
                                                      cudaStream_t stream);

  // Uploads the per-view parameters of BackProjectionWeighting::kMatched (the views' scales
  // and distance power, matched_back_projection.h); Back with kMatched is
  // FAILED_PRECONDITION before. The same geometry and volume as Create's.
  absl::Status PrepareMatchedBack(const VectorGeometry& geometry,
                                  const VolumeGeometry& volume_geometry);

  // Whether the texture sampler can be used for these sizes (3D texture at most 16384 per
  // side, layered texture at most 32768 per side).
  bool TextureFitsForward() const;
  bool LayeredFitsForward() const;  // kLayered: every side <= kMaxTextureLayers
  bool TextureFitsBack() const;
  // The same for a detector of rows x columns, before any projector is made.
  static bool TextureFitsBack(int64_t rows, int64_t columns);
  // The fastest forward sampler these sizes allow: kLayered, else kTexture, else kExact.
  VectorSampler BestForwardSampler() const;

  // The back projector's launch shape (vector_kernels.h, kBpVariant... or, when staged, the
  // shapes of LaunchOneRowStagedBack), for benchmarks.
  void set_back_variant(int32_t variant) { back_variant_ = variant; }
  // The forward projector's block order (LaunchVectorForward's views_inner), for benchmarks.
  void set_forward_views_inner(bool views_inner) { forward_views_inner_ = views_inner; }
  // Store the projections as float16 in the back projector's texture (kTexture): half the
  // texture bytes, an extra relative rounding of 2^-11 per value. Off by default.
  void set_back_half(bool half) { back_half_ = half; }
  // Whether Back with kTexture reads a layered 1D texture (one linear fetch of 2 texels per
  // update instead of a bilinear one of 4): one-slice volumes from one-row detectors whose
  // pixels map onto the row's centre line (the 2D geometries), unless turned off (for
  // benchmarks and tests; on by default).
  void set_back_one_row(bool one_row) { back_one_row_ = one_row; }
  bool BackUsesOneRowTexture() const { return one_row_back_ && back_one_row_; }
  // Whether Back with kTexture stages detector windows in shared memory instead
  // (LaunchOneRowStagedBack: exact float32 interpolation, no texture copy): the one-row
  // geometries above with a flat detector, unless turned off (for benchmarks and tests; on
  // by default). Takes precedence over the 1D texture and float16.
  void set_back_staged(bool staged) { back_staged_ = staged; }
  bool BackUsesStaged() const {
    return one_row_back_ && detector_shape_.cylindrical == 0 && back_staged_;
  }

  // d_projections (views, rows, columns) = A d_volume (nz, ny, nx); every element written.
  // kTexture copies the volume into the kept 3D array first (device to device); kLayered
  // transposes it into two kept scratch buffers and copies the three orientations into
  // the kept layered arrays (3 times the volume's memory in arrays, 2 in scratch).
  absl::Status Forward(const float* d_volume, float* d_projections, VectorSampler sampler);
  // d_volume = B d_projections, every voxel written. kTexture copies the projections into
  // the kept layered array, kMaxTextureLayers views per pass.
  // kLayered is taken as kTexture here. INVALID_ARGUMENT: kFdk with a parallel beam.
  absl::Status Back(const float* d_projections, BackProjectionWeighting weighting,
                    float* d_volume, VectorSampler sampler);
  // The same for views [first_view, first_view + count) only, from d_projections holding
  // those views (count x rows x columns); accumulate: add to d_volume instead of writing
  // it (for views that arrive in chunks). The kept texture array grows to the largest
  // count met (at most kMaxTextureLayers).
  absl::Status BackViews(const float* d_projections, int64_t first_view, int64_t count,
                         BackProjectionWeighting weighting, bool accumulate, float* d_volume,
                         VectorSampler sampler);
  // The same from views already in float16 (LaunchFloatToHalf's bits), for a projector made
  // with set_back_half(true) and sampling the layered texture (kTexture): they are copied
  // into the texture as they are. Lets one set of filtered views, kept on the device in
  // float16, be back projected into several volumes (z-slabs) at half the memory of floats.
  // FAILED_PRECONDITION for a projector that would not sample float16 texels.
  absl::Status BackViewsHalf(const uint16_t* d_half_projections, int64_t first_view,
                             int64_t count, BackProjectionWeighting weighting, bool accumulate,
                             float* d_volume);

  const VectorVolumeShape& volume_shape() const { return volume_shape_; }
  const VectorDetectorShape& detector_shape() const { return detector_shape_; }

 private:
  DeviceVectorProjector() = default;
  // BackViews and BackViewsHalf: exactly one of the two inputs is set.
  absl::Status BackViewsFrom(const float* d_projections, const uint16_t* d_half_projections,
                             int64_t first_view, int64_t count,
                             BackProjectionWeighting weighting, bool accumulate,
                             float* d_volume, VectorSampler sampler);
  cudaStream_t stream_ = nullptr;
  VectorVolumeShape volume_shape_;
  VectorDetectorShape detector_shape_;
  DeviceBuffer<VectorFpView> fp_views_;
  DeviceBuffer<VectorBpView> bp_views_;
  DeviceBuffer<VectorBpView> matched_bp_views_;  // PrepareMatchedBack's, scales in extra.w
  int32_t matched_power_ = 0;
  int32_t back_variant_ = kBpVariantDefault;
  bool forward_views_inner_ = true;
  bool back_half_ = false;
  bool one_row_back_ = false;  // Create's check for the layered 1D texture
  bool back_one_row_ = true;
  bool back_staged_ = true;
  DeviceBuffer<uint16_t> half_scratch_;
  TextureArray volume_texture_;
  TextureArray along_x_, along_y_, along_z_;
  DeviceBuffer<float> scratch_x_, scratch_y_;
  TextureArray projection_texture_;
};

}  // namespace tomo::core::cuda
