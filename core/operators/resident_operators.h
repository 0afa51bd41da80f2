// ResidentOperators: the operators of a Backend on arrays that stay on its device between
// calls, for the iterative methods (core/algorithms/sirt.h, block_iterative.h, cgls.h).
//
// Why: Backend's projectors take host arrays, so every call uploads and downloads; an
// iteration of SIRT on a 256^3 volume would move 64 MB each way per projection. Here the
// algorithm allocates ResidentArrays once (the volume, the projections of each block of
// views, the weights), uploads the data once, iterates with device-side projections and
// element-wise operations, and downloads the result once. Algorithms see only this
// interface, never a device header: CpuBackend's implementation keeps the arrays in host
// memory (host_resident_operators.h, the reference), CudaBackend's in device memory with
// its kernels (core/operators/cuda/cuda_resident_operators.cc).
//
// The operators:
//   - arrays: Allocate (contents unspecified), Upload, Download; float32, Dims3 as Array3D;
//     each allocated with its ResidentRole (a volume or a set of projections), which an
//     implementation over several devices needs to place it (replicated or split by views,
//     several_devices_resident_operators.h); one device ignores it;
//   - CopyFromPeer: an array of another ResidentOperators (another device) into one of
//     this, device to device where the implementations know each other;
//   - projection: a ResidentProjector per (geometry, VolumeGeometry, ProjectorModel), e.g.
//     one per block of views: Forward (projections = A volume) and Back (volume = the
//     model's A^T projections), as the Projector that Backend::MakeProjector makes;
//   - element-wise: Fill, Axpby, Multiply, AddScaledQuotient, InvertGuarded, Clamp;
//   - reduction: Dot, and AccumulateDot / TakeAccumulatedDot for sums over many calls
//     without a wait per call (float64 partial sums on both, added in a fixed order).
// Arrays taking part in one call must have equal element counts (INVALID_ARGUMENT
// otherwise) and come from this object (INVALID_ARGUMENT naming the operation otherwise).
//
// Thread and stream semantics: one ResidentOperators serves one algorithm run on one
// thread. Calls are ordered as made; a device implementation may return before its work is
// done, but Download and Dot wait for it, so what they return is complete. Errors surface
// at the call that made them or at the next waiting call. The Backend that made it must
// outlive it and everything it allocated.
// Errors: INVALID_ARGUMENT for mismatched arrays or geometries (as Backend);
// RESOURCE_EXHAUSTED when the device cannot hold an array; INTERNAL for device failures.
//
//   TOMO_ASSIGN_OR_RETURN(auto ops, backend.MakeResidentOperators());
//   TOMO_ASSIGN_OR_RETURN(auto x, ops->Allocate(volume.dims()));
//   TOMO_ASSIGN_OR_RETURN(auto ax, ops->Allocate(ProjectionDims(geometry),
//                                                ResidentRole::kProjections));
//   TOMO_ASSIGN_OR_RETURN(auto projector,
//                         ops->MakeProjector(geometry, volume, ProjectorModel::kJoseph));
//   TOMO_RETURN_IF_ERROR(ops->Fill(0.0f, *x));
//   TOMO_RETURN_IF_ERROR(projector->Forward(*x, *ax));
//   TOMO_ASSIGN_OR_RETURN(double norm2, ops->Dot(*ax, *ax));
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/data/array3d.h"
#include "core/geometry/geometry.h"
#include "core/geometry/volume_geometry.h"
#include "core/operators/projector_model.h"

namespace tomo::core {

// What an array holds: a volume (z, y, x) or projections (views, rows, columns). Arrays of
// both roles may take part in one projection; the element-wise operations and Dot take
// arrays of one role.
enum class ResidentRole { kVolume, kProjections };

// A float32 array owned by a ResidentOperators (on its device). Move-only through
// unique_ptr; the implementation decides where the elements live.
class ResidentArray {
 public:
  virtual ~ResidentArray() = default;
  ResidentArray(const ResidentArray&) = delete;
  ResidentArray& operator=(const ResidentArray&) = delete;

  const Dims3& dims() const { return dims_; }
  int64_t size() const { return dims_.count(); }
  // The ResidentOperators that allocated it (for the ownership check).
  const void* owner() const { return owner_; }

 protected:
  ResidentArray(Dims3 dims, const void* owner) : dims_(dims), owner_(owner) {}

 private:
  Dims3 dims_;
  const void* owner_;
};

// The projector pair of one geometry and model on resident arrays. Volumes (nz, ny, nx) as
// the VolumeGeometry, projections (views, rows, columns) as ProjectionDims(geometry).
class ResidentProjector {
 public:
  virtual ~ResidentProjector() = default;
  // projections = A volume (every element written).
  virtual absl::Status Forward(const ResidentArray& volume, ResidentArray& projections) = 0;
  // volume = the model's A^T projections (every voxel written).
  virtual absl::Status Back(const ResidentArray& projections, ResidentArray& volume) = 0;
};

class ResidentOperators {
 public:
  virtual ~ResidentOperators() = default;
  // "cpu", "cuda:0": the backend's name.
  virtual std::string name() const = 0;

  // Device bytes free for new arrays, or 0 when the device reports no limit (host memory).
  virtual uint64_t free_bytes() const = 0;

  // An array of dims for the role (INVALID_ARGUMENT for negative dims).
  virtual absl::StatusOr<std::unique_ptr<ResidentArray>> Allocate(
      Dims3 dims, ResidentRole role = ResidentRole::kVolume) = 0;
  // device = host (dims must match).
  virtual absl::Status Upload(const Array3D& host, ResidentArray& device) = 0;
  // host = device (dims must match); complete on return.
  virtual absl::Status Download(const ResidentArray& device, Array3D& host) = 0;

  // target = source, where source was allocated by source_ops (another ResidentOperators,
  // typically on another device) and target by this object; dims must match
  // (INVALID_ARGUMENT naming the operation otherwise). Ordered after the work already
  // issued on both, and work issued later on either (even writes to source) waits for the
  // copy where a device implementation does not. This default goes through host memory
  // (source_ops.Download, then Upload); HostResidentOperators copies host arrays directly,
  // CudaResidentOperators copies device to device (cudaMemcpyPeerAsync).
  virtual absl::Status CopyFromPeer(ResidentOperators& source_ops, const ResidentArray& source,
                                    ResidentArray& target);

  // The projector pair of a model for a geometry (projector_model.h; checked as
  // Backend::MakeProjector, with its words). A device implementation uploads the per-view
  // parameters once here.
  virtual absl::StatusOr<std::unique_ptr<ResidentProjector>> MakeProjector(
      const Geometry& geometry, const VolumeGeometry& volume_geometry,
      ProjectorModel model) = 0;

  // x[i] = value.
  virtual absl::Status Fill(float value, ResidentArray& x) = 0;
  // y[i] = a * x[i] + b * y[i].
  virtual absl::Status Axpby(float a, const ResidentArray& x, float b, ResidentArray& y) = 0;
  // y[i] = w[i] * y[i].
  virtual absl::Status Multiply(const ResidentArray& w, ResidentArray& y) = 0;
  // x[i] = min(max(x[i] + (s[i] > epsilon ? a * d[i] / s[i] : 0), lower), upper): the SIRT
  // update with the column sums s as weights (voxels no ray sees are left alone) and the
  // box constraint, in one pass over the volume. Infinite bounds are allowed.
  virtual absl::Status AddScaledQuotient(float a, const ResidentArray& d, const ResidentArray& s,
                                         float epsilon, float lower, float upper,
                                         ResidentArray& x) = 0;
  // x[i] = x[i] > epsilon ? 1 / x[i] : 0: the guarded reciprocal that turns row and
  // column sums into SIRT weights (rays and voxels that see nothing get weight 0).
  virtual absl::Status InvertGuarded(float epsilon, ResidentArray& x) = 0;
  // x[i] = min(max(x[i], lower), upper); infinite bounds are allowed.
  virtual absl::Status Clamp(float lower, float upper, ResidentArray& x) = 0;
  // sum over i of a[i] * b[i]; complete on return.
  virtual absl::StatusOr<double> Dot(const ResidentArray& a, const ResidentArray& b) = 0;
  // Adds sum over i of a[i] * b[i] to a running total kept on the device, without waiting
  // (a device implementation does not synchronise: SART measures its residual block by
  // block this way). TakeAccumulatedDot waits, returns the total and resets it to 0. The
  // sums are added in call order, each as Dot computes it.
  virtual absl::Status AccumulateDot(const ResidentArray& a, const ResidentArray& b) = 0;
  virtual absl::StatusOr<double> TakeAccumulatedDot() = 0;
};

// The checks every implementation shares, with the same words: INVALID_ARGUMENT when an
// array was not allocated by `owner` or the arrays' element counts differ.
absl::Status CheckResidentOperands(const char* operation, const void* owner,
                                   const ResidentArray& a, const ResidentArray& b);

}  // namespace tomo::core
