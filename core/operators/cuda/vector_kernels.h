// Plain launch functions for the CUDA kernels of the VectorGeometry operators (any 3D or 2D
// geometry, parallel or cone beam, flat or cylindrical detector): vector_forward.cu (Joseph
// forward projection, one thread per detector pixel) and vector_back.cu (voxel-driven back
// projection, one thread per column of voxels along z). The only header those .cu files
// include (no Abseil, no core header), as parallel_2d_kernels.h. The host side
// (cuda_vector_projector.cc) computes the per-view parameters in double
// from the VectorGeometry, owns every buffer and texture and turns the returned cudaError_t
// into absl::Status.
//
// Coordinates: every position and vector below is in VOXEL INDEX units: index (i, j, k)
// of the voxel whose centre is at (x_mm(i), y_mm(j), z_mm(k)), i.e.
//   index = (mm - centre_of_voxel_0) / voxel_size   per axis.
// Volumes are (nz, ny, nx) row-major float32, projections (views, rows, columns).
//
// Each Launch... function enqueues its kernel on `stream` and returns cudaGetLastError()
// taken right after the launch. Pointers are device pointers.
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

namespace tomo::core::cuda {

// How a kernel reads its interpolated input.
//   kTexture: one hardware-filtered fetch (trilinear from a 3D texture for the forward
//             projector, bilinear from a layered 2D texture for the back projector), border
//             address mode so that everything outside reads 0. The hardware interpolation
//             weights have 8 fractional bits (CUDA programming guide, "Linear filtering"),
//             so results differ from the exact interpolation by up to ~2^-9 of the local
//             differences of the data.
//   kExact:   float32 interpolation from plain loads (4 per sample), bounds-checked.
//   kLayered: forward projector only: three layered 2D textures of the volume, one per
//             main axis (layers along x, y or z), so that each sample is one hardware
//             BILINEAR fetch (full rate) instead of a trilinear one from a 3D texture (half
//             rate); the same interpolation. Needs every side <= 2048 (layers).
enum class VectorSampler : int32_t { kTexture = 0, kExact = 1, kLayered = 2 };

// The forward projector's textures (0 where not used): volume3d for kTexture; for kLayered
// along_x = layers x, each (columns y, rows z); along_y = layers y, each (x, z); along_z =
// layers z, each (x, y).
struct VectorFpTextures {
  cudaTextureObject_t volume3d;
  cudaTextureObject_t along_x;
  cudaTextureObject_t along_y;
  cudaTextureObject_t along_z;
};

struct VectorVolumeShape {
  int32_t nx = 0, ny = 0, nz = 0;
  float voxel_mm[3] = {1, 1, 1};  // voxel size per axis (x, y, z)
};

struct VectorDetectorShape {
  int32_t num_views = 0, rows = 0, columns = 0;
  int32_t cone = 1;         // 1: cone beam, 0: parallel beam
  int32_t cylindrical = 0;  // 1: cylindrical detector (cone only)
};

// Forward projection, one view (index units). Pixel (r, c) centre, cr = r - (rows-1)/2,
// cc = c - (columns-1)/2:
//   flat:        center + cc u + cr v
//   cylindrical: center + (cos g - 1) u + sin g w + cr v,  g = cc * gamma_per_column;
//                here u = R * (unit vector from the source towards the detector centre,
//                perpendicular to v), w = R * u_geometry / |u_geometry| (as
//                VectorGeometry::PixelPosition), gamma_per_column = |u_geometry| / R.
// The ray: cone: from `source` through the pixel centre (t >= 0); parallel: the line
// through the pixel centre along `source` (the ray direction, in index units).
// Plain old data; value-initialise it on the host.
struct VectorFpView {
  float source[3];
  float center[3];
  float u[3];
  float v[3];
  float w[3];
  float gamma_per_column;
};
static_assert(sizeof(VectorFpView) == 64, "VectorFpView must have one layout for g++ and nvcc");

// Back projection, one view: the voxel at index X = (ix, iy, iz) maps to the detector by
// linear forms  f(X) = f.x * ix + f.y * iy + f.z * iz + f.w.
//   flat (parallel and cone): column = a(X) / d(X), row = b(X) / d(X) (fractional pixel
//       indices, pixel centres at integers); d(X) = U / D for a cone beam (the voxel's depth
//       along the detector normal over the source-detector-plane distance), d = 1 for a
//       parallel beam (a.w and b.w include the detector centre's (columns-1)/2, (rows-1)/2).
//       The FDK weight (D / U)^2 is 1 / d^2. Voxels with d <= 0 (behind the source) get 0.
//   cylindrical: p = a(X), q = b(X) (components of X - source along the unit vector
//       towards the detector centre and along the tangent, both over R), s = d(X)
//       (component along v^ over |v|): rho = sqrt(p^2 + q^2), column = atan2(q, p) *
//       extra.x + extra.y, row = s / rho + extra.z, FDK weight 1 / rho^2 (= (R / U)^2).
//       Voxels with p <= 0 get 0.
struct VectorBpView {
  float4 a;
  float4 b;
  float4 d;
  float4 extra;  // cylindrical: (R / |u|, (columns-1)/2, (rows-1)/2 - h_c / |v|, scale),
                 // h_c = height of the detector centre above the source along v^; flat:
                 // (unused, unused, unused, scale). scale multiplies every sample of the
                 // view for distance powers 0 and 1: 1, or kMatched's
                 // (matched_back_projection.h)
};
static_assert(sizeof(VectorBpView) == 64, "VectorBpView must have one layout for g++ and nvcc");

// projections[view][row][column] = A volume for views [0, detector.num_views): every
// element written. Sampling: kTexture reads `volume_texture` (3D float texture of (nx, ny,
// nz), linear filtering, unnormalised coordinates, border addressing); kExact reads
// `volume` (either may be null when not used). views: device array of num_views.
// views_inner: block order, 1 (default) = the same detector rows of many views in flight
// together (better L2 reuse for circular scans), 0 = one view after another (v0.2).
cudaError_t LaunchVectorForward(const VectorVolumeShape& volume_shape,
                                const VectorDetectorShape& detector, const VectorFpView* views,
                                VectorSampler sampler, const VectorFpTextures& textures,
                                const float* volume, float* projections, cudaStream_t stream,
                                int32_t views_inner = 1);

// For kLayered: volume (nz, ny, nx) -> along_x (nx, nz, ny) and along_y (ny, nz, nx), the
// volume with its layers along x and along y (row-major, last index fastest).
cudaError_t LaunchVolumeTransposes(const float* volume, int32_t nx, int32_t ny, int32_t nz,
                                   float* along_x, float* along_y, cudaStream_t stream);

// out[i] = (half) in[i] for i < count (round to nearest; out holds IEEE binary16 bits), for
// a half-precision projection texture (the back projector's kTexture reads it as float).
cudaError_t LaunchFloatToHalf(const float* in, int64_t count, uint16_t* out, cudaStream_t stream);

// Back projector launch shapes (block x, block y, voxels per thread along z), for the
// benchmark to compare; kBpVariantDefault is what CudaBackend uses.
//   0: 32 x 4 x 8   1: 16 x 8 x 8   2: 32 x 4 x 16   3: 8 x 8 x 8
// Volumes of one slice (nz = 1, 2D geometries) use a 2D-specialised kernel instead, whose
// threads own pixels along y (block x, block y, pixels per thread along y):
//   0: 32 x 4 x 2   1: 32 x 4 x 4   2: 32 x 8 x 2   3: 16 x 8 x 2
// (the same `variant` argument picks among these when nz = 1).
constexpr int32_t kBpVariantDefault = 0;
constexpr int32_t kBpVariantCount = 4;
// What CudaBackend uses for kFdk on volumes of more than one slice (32 x 4 x 16): FDK case 1
// with float16 texels 74.4 ms vs 77.2 ms with the default (H100, bench/NOTES.md v0.3).
constexpr int32_t kBpVariantFdk = 2;

// volume (+)= sum over views [0, detector.num_views) of the interpolated projections
// each times its view's scale (VectorBpView::extra.w; not read for weight_power 2, where a
// scale is folded into the view's forms) and the distance weight (1/d or 1/rho) to the
// power weight_power: 0 (plain), 1 (2D fan beams, matched; volumes of one
// slice only, cudaErrorInvalidValue otherwise) or 2 (FDK; 3D cone beams, matched).
// accumulate = 0 overwrites every voxel; 1 adds to it
// (for views in several passes). kTexture reads `projection_texture` (layered 2D float
// texture, layer = view, linear filtering, border addressing, unnormalised); kExact reads
// `projections` (views, rows, columns).
// one_row_texture = 1 (kTexture, nz = 1, detector.rows = 1, every pixel maps onto the
// detector row's centre line, i.e. row 0 exactly; the host checks): `projection_texture`
// is a layered 1D float texture (layer = view, width = columns) instead, one linear fetch
// of 2 texels per update (v0.4).
cudaError_t LaunchVectorBack(const VectorVolumeShape& volume_shape,
                             const VectorDetectorShape& detector, const VectorBpView* views,
                             VectorSampler sampler, int32_t weight_power, int32_t accumulate,
                             cudaTextureObject_t projection_texture, const float* projections,
                             float* volume, cudaStream_t stream,
                             int32_t variant = kBpVariantDefault,
                             int32_t one_row_texture = 0);

// One-slice volumes (nz = 1) from one-row FLAT detectors whose pixels all map onto the
// row's centre line (the 2D parallel and fan geometries; the host checks as for
// one_row_texture): volume (+)= the same sum as LaunchVectorBack, from `projections`
// (views, 1, columns) in device memory, with each block's detector windows staged in
// shared memory and interpolated exactly in float32 (one_row_staged_back.cu, v0.5).
// Launch shapes (block x, block y, pixels per thread along y):
//   0: 32 x 8 x 4   1: 32 x 8 x 2   2: 32 x 4 x 4   3: 32 x 16 x 2
cudaError_t LaunchOneRowStagedBack(const VectorVolumeShape& volume_shape,
                                   const VectorDetectorShape& detector,
                                   const VectorBpView* views, int32_t weight_power,
                                   int32_t accumulate,
                                   const float* projections, float* volume, cudaStream_t stream,
                                   int32_t variant = 0);

}  // namespace tomo::core::cuda
