// The VectorGeometry projectors on device data (cuda_vector_projector.h): the kernels'
// per-view parameters (computed on the host in double by the same formulas and the same
// case decision as the CPU reference, cpu_vector_projector.cc), the texture arrays they
// sample, and DeviceVectorProjector. Host code, compiled by g++.
#include "core/operators/cuda/cuda_vector_projector.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include <cuda_runtime.h>
#include <cufft.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "core/operators/cuda/cuda_check.h"
#include "core/operators/cuda/cuda_memory_pool.h"
#include "core/operators/matched_back_projection.h"

namespace tomo::core::cuda {
namespace {


// Index coordinates of the volume (as cpu_vector_projector.cc): index = p / voxel + origin.
struct IndexFrame {
  double voxel[3];
  double origin[3];
};

IndexFrame MakeIndexFrame(const VolumeGeometry& volume) {
  const Size3& size = volume.size();
  const double counts[3] = {static_cast<double>(size.x), static_cast<double>(size.y),
                            static_cast<double>(size.z)};
  const double voxels[3] = {volume.voxel_size_mm().x, volume.voxel_size_mm().y,
                            volume.voxel_size_mm().z};
  const double centers[3] = {volume.center_mm().x, volume.center_mm().y, volume.center_mm().z};
  IndexFrame frame;
  for (int k = 0; k < 3; ++k) {
    frame.voxel[k] = voxels[k];
    frame.origin[k] = -centers[k] / voxels[k] + 0.5 * (counts[k] - 1.0);
  }
  return frame;
}

void PointToIndex(const IndexFrame& f, const Vec3& p, float out[3]) {
  out[0] = static_cast<float>(p.x / f.voxel[0] + f.origin[0]);
  out[1] = static_cast<float>(p.y / f.voxel[1] + f.origin[1]);
  out[2] = static_cast<float>(p.z / f.voxel[2] + f.origin[2]);
}

void VectorToIndex(const IndexFrame& f, const Vec3& v, float out[3]) {
  out[0] = static_cast<float>(v.x / f.voxel[0]);
  out[1] = static_cast<float>(v.y / f.voxel[1]);
  out[2] = static_cast<float>(v.z / f.voxel[2]);
}

// The linear form X -> g . p(X) + g0 with p(X) the mm position of voxel index X, as
// coefficients on the index: p_k = (X_k - origin_k) * voxel_k.
float4 IndexForm(const IndexFrame& f, const Vec3& g, double g0) {
  const double gk[3] = {g.x, g.y, g.z};
  double constant = g0;
  double coefficient[3];
  for (int k = 0; k < 3; ++k) {
    coefficient[k] = gk[k] * f.voxel[k];
    constant -= coefficient[k] * f.origin[k];
  }
  return make_float4(static_cast<float>(coefficient[0]), static_cast<float>(coefficient[1]),
                     static_cast<float>(coefficient[2]), static_cast<float>(constant));
}

}  // namespace

std::vector<VectorFpView> MakeVectorFpViews(const VectorGeometry& geometry,
                                            const VolumeGeometry& volume_geometry) {
  const IndexFrame frame = MakeIndexFrame(volume_geometry);
  const bool cone = geometry.beam() == BeamKind::kCone;
  const bool cylindrical = geometry.detector() == DetectorShape::kCylindrical;
  std::vector<VectorFpView> views;
  views.reserve(geometry.views().size());
  for (const ViewVectors& vectors : geometry.views()) {
    VectorFpView view{};
    if (cone) {
      PointToIndex(frame, vectors.source, view.source);
    } else {
      VectorToIndex(frame, vectors.source, view.source);
    }
    PointToIndex(frame, vectors.detector_center, view.center);
    VectorToIndex(frame, vectors.v, view.v);
    if (cylindrical) {
      const CylindricalDetectorFrame c = MakeCylindricalDetectorFrame(vectors);
      VectorToIndex(frame, c.radius_mm * c.w, view.u);
      VectorToIndex(frame, (c.radius_mm / c.u_norm_mm) * vectors.u, view.w);
      view.gamma_per_column = static_cast<float>(c.u_norm_mm / c.radius_mm);
    } else {
      VectorToIndex(frame, vectors.u, view.u);
    }
    views.push_back(view);
  }
  return views;
}

std::vector<VectorBpView> MakeVectorBpViews(const VectorGeometry& geometry,
                                            const VolumeGeometry& volume_geometry) {
  const IndexFrame frame = MakeIndexFrame(volume_geometry);
  const bool cone = geometry.beam() == BeamKind::kCone;
  const bool cylindrical = geometry.detector() == DetectorShape::kCylindrical;
  const double column_center = 0.5 * static_cast<double>(geometry.columns() - 1);
  const double row_center = 0.5 * static_cast<double>(geometry.rows() - 1);
  std::vector<VectorBpView> views;
  views.reserve(geometry.views().size());
  for (const ViewVectors& vectors : geometry.views()) {
    VectorBpView view{};
    const Vec3& s = vectors.source;
    if (cylindrical) {
      const CylindricalDetectorFrame c = MakeCylindricalDetectorFrame(vectors);
      // a = (p - s) . w / R, b = (p - s) . e / R, d = (p - s) . v^ / |v|.
      const Vec3 ga = (1.0 / c.radius_mm) * c.w;
      const Vec3 gb = (1.0 / c.radius_mm) * c.e;
      const Vec3 gd = (1.0 / c.v_norm_mm) * c.v_unit;
      view.a = IndexForm(frame, ga, -Dot(ga, s));
      view.b = IndexForm(frame, gb, -Dot(gb, s));
      view.d = IndexForm(frame, gd, -Dot(gd, s));
      view.extra = make_float4(static_cast<float>(c.radius_mm / c.u_norm_mm),
                               static_cast<float>(column_center),
                               static_cast<float>(row_center - c.height_center_mm / c.v_norm_mm), 1.0f);
      views.push_back(view);
      continue;
    }
    view.extra = make_float4(0.0f, 0.0f, 0.0f, 1.0f);
    const Vec3 n = Cross(vectors.u, vectors.v);
    const Vec3 v_cross_n = Cross(vectors.v, n);
    const Vec3 n_cross_u = Cross(n, vectors.u);
    const Vec3 u_dual = (1.0 / Dot(vectors.u, v_cross_n)) * v_cross_n;
    const Vec3 v_dual = (1.0 / Dot(vectors.v, n_cross_u)) * n_cross_u;
    const Vec3& c = vectors.detector_center;
    if (cone) {
      // t = ((c - s) . n) / ((p - s) . n); d = 1 / t = (p - s) . n / D'.
      // column = (s - c) . u* + cc + t (p - s) . u*, so column * d = K d + (p - s) . u*.
      const double big_d = Dot(c - s, n);
      const Vec3 gd = (1.0 / big_d) * n;
      const double ka = Dot(s - c, u_dual) + column_center;
      const double kb = Dot(s - c, v_dual) + row_center;
      const Vec3 ga = ka * gd + u_dual;
      const Vec3 gb = kb * gd + v_dual;
      view.a = IndexForm(frame, ga, -Dot(ga, s));
      view.b = IndexForm(frame, gb, -Dot(gb, s));
      view.d = IndexForm(frame, gd, -Dot(gd, s));
    } else {
      // q = p + t r on the plane: column = (p - c) . (u* - n (r . u*) / (r . n)) + cc.
      const Vec3& r = vectors.source;
      const double rn = Dot(r, n);
      const Vec3 ga = u_dual - (Dot(r, u_dual) / rn) * n;
      const Vec3 gb = v_dual - (Dot(r, v_dual) / rn) * n;
      view.a = IndexForm(frame, ga, -Dot(ga, c) + column_center);
      view.b = IndexForm(frame, gb, -Dot(gb, c) + row_center);
      view.d = make_float4(0.0f, 0.0f, 0.0f, 1.0f);
    }
    views.push_back(view);
  }
  return views;
}

absl::StatusOr<TextureArray> TextureArray::Create(int64_t width, int64_t height, int64_t depth,
                                                  bool layered, bool half) {
  TextureArray result;
  result.element_bytes_ = half ? 2 : 4;
  const cudaChannelFormatDesc format =
      half ? cudaCreateChannelDescHalf() : cudaCreateChannelDesc<float>();
  // Outside the memory pool: may need the memory the pool keeps (cuda_memory_pool.h).
  TOMO_RETURN_IF_ERROR(WithPoolTrimmedOnExhaustion([&]() -> absl::Status {
    TOMO_CUDA_RETURN_IF_ERROR(cudaMalloc3DArray(
        &result.array_, &format,
        make_cudaExtent(static_cast<size_t>(width), static_cast<size_t>(height),
                        static_cast<size_t>(depth)),
        layered ? cudaArrayLayered : 0));
    return absl::OkStatus();
  }));
  result.width_ = width;
  result.height_ = height;
  result.depth_ = depth;
  cudaResourceDesc resource{};
  resource.resType = cudaResourceTypeArray;
  resource.res.array.array = result.array_;
  cudaTextureDesc description{};
  description.addressMode[0] = cudaAddressModeBorder;
  description.addressMode[1] = cudaAddressModeBorder;
  description.addressMode[2] = cudaAddressModeBorder;
  description.filterMode = cudaFilterModeLinear;
  description.readMode = cudaReadModeElementType;
  description.normalizedCoords = 0;
  TOMO_CUDA_RETURN_IF_ERROR(
      cudaCreateTextureObject(&result.texture_, &resource, &description, nullptr));
  return result;
}

absl::Status TextureArray::Load(const void* source, int64_t first, int64_t depth,
                                cudaMemcpyKind kind, cudaStream_t stream) const {
  if (first < 0 || depth < 0 || first + depth > depth_) {
    return absl::InternalError(absl::StrCat("TextureArray::Load: slices [", first, ", ",
                                            first + depth, ") outside [0, ", depth_, ")"));
  }
  if (depth == 0) return absl::OkStatus();
  // A layered 1D array (height 0) holds slices of one row.
  const size_t height = static_cast<size_t>(std::max<int64_t>(height_, 1));
  cudaMemcpy3DParms copy{};
  copy.srcPtr = make_cudaPitchedPtr(const_cast<void*>(source),
                                    static_cast<size_t>(width_ * element_bytes_),
                                    static_cast<size_t>(width_), height);
  copy.dstArray = array_;
  copy.dstPos = make_cudaPos(0, 0, static_cast<size_t>(first));
  copy.extent = make_cudaExtent(static_cast<size_t>(width_), height, static_cast<size_t>(depth));
  copy.kind = kind;
  cudaError_t error = cudaMemcpy3DAsync(&copy, stream);
  if (error == cudaErrorInvalidValue && height_ == 0) {
    // Should a driver want the layered 1D array's own height (0) in the extent.
    (void)cudaGetLastError();
    copy.extent.height = 0;
    error = cudaMemcpy3DAsync(&copy, stream);
  }
  TOMO_CUDA_RETURN_IF_ERROR(error);
  return absl::OkStatus();
}

void TextureArray::Reset() {
  if (texture_ != 0) cudaDestroyTextureObject(texture_);
  if (array_ != nullptr) cudaFreeArray(array_);
  texture_ = 0;
  array_ = nullptr;
}

absl::StatusOr<DeviceVectorProjector> DeviceVectorProjector::Create(
    const VectorGeometry& geometry, const VolumeGeometry& volume_geometry, cudaStream_t stream) {
  constexpr int64_t kMaxInt32 = 2147483647;
  const Size3& size = volume_geometry.size();
  if (size.x * size.y >= kMaxInt32 || geometry.rows() * geometry.columns() >= kMaxInt32) {
    return absl::InvalidArgumentError(absl::StrCat(
        "volume slice of ", size.x, " x ", size.y, " or detector of ", geometry.rows(), " x ",
        geometry.columns(), " exceeds the CUDA kernels' 2^31 elements per slice"));
  }
  DeviceVectorProjector p;
  p.stream_ = stream;
  p.volume_shape_.nx = static_cast<int32_t>(size.x);
  p.volume_shape_.ny = static_cast<int32_t>(size.y);
  p.volume_shape_.nz = static_cast<int32_t>(size.z);
  p.volume_shape_.voxel_mm[0] = static_cast<float>(volume_geometry.voxel_size_mm().x);
  p.volume_shape_.voxel_mm[1] = static_cast<float>(volume_geometry.voxel_size_mm().y);
  p.volume_shape_.voxel_mm[2] = static_cast<float>(volume_geometry.voxel_size_mm().z);
  p.detector_shape_.num_views = static_cast<int32_t>(geometry.num_views());
  p.detector_shape_.rows = static_cast<int32_t>(geometry.rows());
  p.detector_shape_.columns = static_cast<int32_t>(geometry.columns());
  p.detector_shape_.cone = geometry.beam() == BeamKind::kCone ? 1 : 0;
  p.detector_shape_.cylindrical = geometry.detector() == DetectorShape::kCylindrical ? 1 : 0;
  const std::vector<VectorFpView> fp = MakeVectorFpViews(geometry, volume_geometry);
  const std::vector<VectorBpView> bp = MakeVectorBpViews(geometry, volume_geometry);
  TOMO_ASSIGN_OR_RETURN(p.fp_views_, DeviceBuffer<VectorFpView>::Allocate(fp.size(), stream));
  TOMO_ASSIGN_OR_RETURN(p.bp_views_, DeviceBuffer<VectorBpView>::Allocate(bp.size(), stream));
  TOMO_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(p.fp_views_.get(), fp.data(),
                                            p.fp_views_.size_bytes(), cudaMemcpyHostToDevice,
                                            stream));
  TOMO_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(p.bp_views_.get(), bp.data(),
                                            p.bp_views_.size_bytes(), cudaMemcpyHostToDevice,
                                            stream));
  // One slice from a one-row detector whose every pixel maps onto the row's centre line
  // (row coordinate 0 exactly, as the 2D geometries give): the back projector may read a
  // layered 1D texture (LaunchVectorBack's one_row_texture). The kernel evaluates the forms
  // at iz = 0, so the z coefficients do not matter.
  const bool cylindrical = p.detector_shape_.cylindrical != 0;
  p.one_row_back_ =
      p.volume_shape_.nz == 1 && p.detector_shape_.rows == 1 &&
      std::all_of(bp.begin(), bp.end(), [cylindrical](const VectorBpView& v) {
        return cylindrical ? (v.d.x == 0.0f && v.d.y == 0.0f && v.d.w == 0.0f &&
                              v.extra.z == 0.0f)
                           : (v.b.x == 0.0f && v.b.y == 0.0f && v.b.w == 0.0f);
      });
  // The host vectors die at return: the copies from pageable memory are staged before
  // cudaMemcpyAsync returns, so this is safe.
  return p;
}

bool DeviceVectorProjector::TextureFitsForward() const {
  constexpr int32_t kMax3d = 16384;
  return volume_shape_.nx <= kMax3d && volume_shape_.ny <= kMax3d && volume_shape_.nz <= kMax3d;
}

bool DeviceVectorProjector::TextureFitsBack() const {
  return TextureFitsBack(detector_shape_.rows, detector_shape_.columns);
}

bool DeviceVectorProjector::TextureFitsBack(int64_t rows, int64_t columns) {
  constexpr int64_t kMaxLayered = 32768;
  return rows <= kMaxLayered && columns <= kMaxLayered;
}

bool DeviceVectorProjector::LayeredFitsForward() const {
  return volume_shape_.nx <= kMaxTextureLayers && volume_shape_.ny <= kMaxTextureLayers &&
         volume_shape_.nz <= kMaxTextureLayers;
}

VectorSampler DeviceVectorProjector::BestForwardSampler() const {
  // Measured on the H100 (bench/NOTES.md, v0.3, the block order with many views' same
  // rows in flight): layered 10.2 vs 3D texture 13.5 ms for 256^3 -> 360 x 384^2, 161 vs
  // 213 ms for 512^3 -> 720 x 768^2. (v0.2, one view after another: 3D texture faster at
  // 512^3.) Layered needs 5 times the volume's memory (three arrays, two transposes), so
  // it is used up to the largest size measured, 512^3; the 3D texture (1x) above.
  constexpr int64_t kLayeredMaxVoxels = int64_t{512} * 512 * 512;
  const int64_t voxels = static_cast<int64_t>(volume_shape_.nx) * volume_shape_.ny *
                         volume_shape_.nz;
  if (LayeredFitsForward() && voxels <= kLayeredMaxVoxels) return VectorSampler::kLayered;
  if (TextureFitsForward()) return VectorSampler::kTexture;
  return VectorSampler::kExact;
}

absl::Status DeviceVectorProjector::Forward(const float* d_volume, float* d_projections,
                                            VectorSampler sampler) {
  VectorFpTextures textures{};
  const int64_t nx = volume_shape_.nx, ny = volume_shape_.ny, nz = volume_shape_.nz;
  if (sampler == VectorSampler::kTexture) {
    if (!TextureFitsForward()) {
      return absl::InvalidArgumentError("volume too large for the 3D texture sampler");
    }
    if (!volume_texture_.valid()) {
      TOMO_ASSIGN_OR_RETURN(volume_texture_,
                            TextureArray::Create(nx, ny, nz, /*layered=*/false));
    }
    TOMO_RETURN_IF_ERROR(
        volume_texture_.Load(d_volume, 0, nz, cudaMemcpyDeviceToDevice, stream_));
    textures.volume3d = volume_texture_.texture();
  } else if (sampler == VectorSampler::kLayered) {
    if (!LayeredFitsForward()) {
      return absl::InvalidArgumentError("volume too large for the layered texture sampler");
    }
    if (!along_z_.valid()) {
      const size_t count = static_cast<size_t>(nx * ny * nz);
      TOMO_ASSIGN_OR_RETURN(scratch_x_, DeviceBuffer<float>::Allocate(count, stream_));
      TOMO_ASSIGN_OR_RETURN(scratch_y_, DeviceBuffer<float>::Allocate(count, stream_));
      TOMO_ASSIGN_OR_RETURN(along_x_, TextureArray::Create(ny, nz, nx, /*layered=*/true));
      TOMO_ASSIGN_OR_RETURN(along_y_, TextureArray::Create(nx, nz, ny, /*layered=*/true));
      TOMO_ASSIGN_OR_RETURN(along_z_, TextureArray::Create(nx, ny, nz, /*layered=*/true));
    }
    TOMO_CUDA_RETURN_IF_ERROR(LaunchVolumeTransposes(
        d_volume, volume_shape_.nx, volume_shape_.ny, volume_shape_.nz, scratch_x_.get(),
        scratch_y_.get(), stream_));
    TOMO_RETURN_IF_ERROR(along_x_.Load(scratch_x_.get(), 0, nx, cudaMemcpyDeviceToDevice, stream_));
    TOMO_RETURN_IF_ERROR(along_y_.Load(scratch_y_.get(), 0, ny, cudaMemcpyDeviceToDevice, stream_));
    TOMO_RETURN_IF_ERROR(along_z_.Load(d_volume, 0, nz, cudaMemcpyDeviceToDevice, stream_));
    textures.along_x = along_x_.texture();
    textures.along_y = along_y_.texture();
    textures.along_z = along_z_.texture();
  }
  TOMO_CUDA_RETURN_IF_ERROR(LaunchVectorForward(volume_shape_, detector_shape_, fp_views_.get(),
                                                sampler, textures, d_volume, d_projections,
                                                stream_, forward_views_inner_ ? 1 : 0));
  return absl::OkStatus();
}

absl::Status DeviceVectorProjector::PrepareMatchedBack(const VectorGeometry& geometry,
                                                      const VolumeGeometry& volume_geometry) {
  const MatchedWeights weights = MakeMatchedWeights(geometry, volume_geometry);
  std::vector<VectorBpView> views = MakeVectorBpViews(geometry, volume_geometry);
  for (size_t v = 0; v < views.size(); ++v) {
    const double scale = weights.view_scale[v];
    if (weights.distance_power == 2) {
      // The kernels' weight is 1 / d^2 (or 1 / rho^2), and scaling every form by f keeps
      // the detector position (a ratio of forms) and multiplies that weight by 1 / f^2.
      const float f = static_cast<float>(1.0 / std::sqrt(scale));
      for (float4* form : {&views[v].a, &views[v].b, &views[v].d}) {
        form->x *= f;
        form->y *= f;
        form->z *= f;
        form->w *= f;
      }
    } else {
      views[v].extra.w = static_cast<float>(scale);
    }
  }
  TOMO_ASSIGN_OR_RETURN(matched_bp_views_,
                        DeviceBuffer<VectorBpView>::Allocate(views.size(), stream_));
  TOMO_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(matched_bp_views_.get(), views.data(),
                                            matched_bp_views_.size_bytes(),
                                            cudaMemcpyHostToDevice, stream_));
  matched_power_ = weights.distance_power;
  return absl::OkStatus();
}

absl::Status DeviceVectorProjector::Back(const float* d_projections,
                                         BackProjectionWeighting weighting, float* d_volume,
                                         VectorSampler sampler) {
  return BackViews(d_projections, 0, detector_shape_.num_views, weighting,
                   /*accumulate=*/false, d_volume, sampler);
}

absl::Status DeviceVectorProjector::BackViews(const float* d_projections, int64_t first_view,
                                              int64_t count, BackProjectionWeighting weighting,
                                              bool accumulate, float* d_volume,
                                              VectorSampler sampler) {
  return BackViewsFrom(d_projections, nullptr, first_view, count, weighting, accumulate,
                       d_volume, sampler);
}

absl::Status DeviceVectorProjector::BackViewsHalf(const uint16_t* d_half_projections,
                                                  int64_t first_view, int64_t count,
                                                  BackProjectionWeighting weighting,
                                                  bool accumulate, float* d_volume) {
  if (!back_half_ || BackUsesStaged() || !TextureFitsBack()) {
    return absl::FailedPreconditionError(
        "BackViewsHalf: this projector does not sample float16 texels from the layered "
        "texture (set_back_half(true), not staged, detector within the texture's limits)");
  }
  return BackViewsFrom(nullptr, d_half_projections, first_view, count, weighting, accumulate,
                       d_volume, VectorSampler::kTexture);
}

absl::Status DeviceVectorProjector::BackViewsFrom(const float* d_projections,
                                                  const uint16_t* d_half_projections,
                                                  int64_t first_view, int64_t count,
                                                  BackProjectionWeighting weighting,
                                                  bool accumulate, float* d_volume,
                                                  VectorSampler sampler) {
  const bool fdk = weighting == BackProjectionWeighting::kFdk;
  if (fdk && detector_shape_.cone == 0) {
    return absl::InvalidArgumentError(
        "weighting: kFdk (the FDK distance weight) needs a cone beam; this geometry is a "
        "parallel beam");
  }
  if (first_view < 0 || count < 1 || first_view + count > detector_shape_.num_views) {
    return absl::InvalidArgumentError(absl::StrCat("views [", first_view, ", ",
                                                   first_view + count, ") outside [0, ",
                                                   detector_shape_.num_views, ")"));
  }
  const bool matched = weighting == BackProjectionWeighting::kMatched;
  if (matched && matched_bp_views_.get() == nullptr) {
    return absl::FailedPreconditionError(
        "weighting: kMatched needs the projector made with its matched weights");
  }
  const int32_t power = matched ? matched_power_ : fdk ? 2 : 0;
  const VectorBpView* views = (matched ? matched_bp_views_.get() : bp_views_.get()) + first_view;
  VectorDetectorShape shape = detector_shape_;
  shape.num_views = static_cast<int32_t>(count);
  const int32_t add = accumulate ? 1 : 0;
  if (sampler == VectorSampler::kLayered) sampler = VectorSampler::kTexture;
  if (sampler == VectorSampler::kExact) {
    TOMO_CUDA_RETURN_IF_ERROR(LaunchVectorBack(volume_shape_, shape, views, sampler, power, add,
                                               0, d_projections, d_volume, stream_,
                                               kBpVariantDefault));
    return absl::OkStatus();
  }
  if (BackUsesStaged()) {
    TOMO_CUDA_RETURN_IF_ERROR(LaunchOneRowStagedBack(volume_shape_, shape, views, power, add,
                                                     d_projections, d_volume, stream_,
                                                     back_variant_));
    return absl::OkStatus();
  }
  if (!TextureFitsBack()) {
    return absl::InvalidArgumentError("detector too large for the layered texture sampler");
  }
  const int64_t layers = std::min<int64_t>(count, kMaxTextureLayers);
  const int64_t view_size = static_cast<int64_t>(detector_shape_.rows) * detector_shape_.columns;
  // One-row detectors: a layered 1D array (height 0), else layered 2D. The array is kept
  // while it is large enough.
  const bool one_row = BackUsesOneRowTexture();
  const int64_t height = one_row ? 0 : detector_shape_.rows;
  if (!projection_texture_.valid() || projection_texture_.depth() < layers ||
      projection_texture_.half() != back_half_ || projection_texture_.height() != height) {
    projection_texture_.Reset();
    TOMO_ASSIGN_OR_RETURN(projection_texture_,
                          TextureArray::Create(detector_shape_.columns, height, layers,
                                               /*layered=*/true, back_half_));
    if (back_half_) {
      TOMO_ASSIGN_OR_RETURN(half_scratch_, DeviceBuffer<uint16_t>::Allocate(
                                               static_cast<size_t>(layers * view_size), stream_));
    }
  }
  for (int64_t v0 = 0; v0 < count; v0 += layers) {
    const int64_t pass = std::min(layers, count - v0);
    if (d_half_projections != nullptr) {
      TOMO_RETURN_IF_ERROR(projection_texture_.Load(d_half_projections + v0 * view_size, 0,
                                                    pass, cudaMemcpyDeviceToDevice, stream_));
    } else if (back_half_) {
      TOMO_CUDA_RETURN_IF_ERROR(LaunchFloatToHalf(d_projections + v0 * view_size,
                                                  pass * view_size, half_scratch_.get(),
                                                  stream_));
      TOMO_RETURN_IF_ERROR(projection_texture_.Load(half_scratch_.get(), 0, pass,
                                                    cudaMemcpyDeviceToDevice, stream_));
    } else {
      TOMO_RETURN_IF_ERROR(projection_texture_.Load(d_projections + v0 * view_size, 0, pass,
                                                    cudaMemcpyDeviceToDevice, stream_));
    }
    VectorDetectorShape chunk = shape;
    chunk.num_views = static_cast<int32_t>(pass);
    TOMO_CUDA_RETURN_IF_ERROR(LaunchVectorBack(
        volume_shape_, chunk, views + v0, sampler, power, v0 > 0 ? 1 : add,
        projection_texture_.texture(), nullptr, d_volume, stream_, back_variant_,
        one_row ? 1 : 0));
  }
  return absl::OkStatus();
}

}  // namespace tomo::core::cuda
