// Backend: the operators that algorithms are written over, implemented once per kind of
// device (CpuBackend is the reference; CudaBackend must agree with it, see
// tests/core/operators/cuda). Algorithms never include a device header.
//
// Projectors: a Backend makes a Projector (projector.h) from a geometry, a volume and a
// ProjectorModel (projector_model.h: the models, their units and how close each Back is to
// Forward's adjoint). The projections themselves:
//
// 2D parallel beams, Joseph's method (kJosephExactTranspose2D): for each ray, step one pixel
// at a time along the image axis the ray is closest to (y when |cos theta| >= |sin theta|,
// else x), linearly interpolate between the two nearest pixels across it (pixels outside
// the image count as zero) and weight by the path length per step, pixel size / |direction
// component|. Back is the exact transpose (<A x, y> = <x, A^T y> up to float rounding),
// evaluated voxel by voxel (a gather: no atomics).
//
// Any VectorGeometry (2D and 3D, parallel and cone): Forward is Joseph's method in 3D: each
// ray steps one voxel plane at a time along the volume axis it is most nearly parallel to,
// interpolates bilinearly in that plane (voxels outside count as zero) and weights by voxel
// size / |direction component along that axis|. Back is voxel-driven: each voxel centre is
// projected onto each view's detector and the projections are interpolated bilinearly there
// (zero outside the detector), times a weight (BackProjectionWeighting): kNone 1; kFdk the
// FDK distance weight (D / U)^2 (for a flat detector D = distance from the source to the
// detector plane and U = depth of the voxel along the detector normal from the source; for
// a cylindrical detector D = its radius and U = distance from the source to the voxel
// measured perpendicular to v; cone beams only); kMatched the weight that makes it close to
// Joseph's transpose in mm (projector_model.h, matched_back_projection.h).
//
// Thread safety: one Backend serves one job at a time; calls are synchronous (data are
// host arrays, results are complete when the call returns).
// Errors: INVALID_ARGUMENT when array dims do not match the geometry; RESOURCE_EXHAUSTED
// when the device cannot hold the data; INTERNAL for device failures, naming the call.
#pragma once

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/data/array3d.h"
#include "core/filters/ramp_filter.h"
#include "core/operators/filter_and_back_project_stream.h"
#include "core/operators/filtered_back_projection_weights.h"
#include "core/geometry/geometry.h"
#include "core/geometry/parallel_geometry_2d.h"
#include "core/geometry/vector_geometry.h"
#include "core/geometry/volume_geometry.h"
#include "core/operators/projector.h"
#include "core/operators/projector_model.h"
#include "core/operators/radon_operators.h"
#include "core/operators/resident_operators.h"

namespace tomo::core {


class Backend {
 public:
  virtual ~Backend() = default;
  // "cpu", "cuda:0", ...
  virtual std::string name() const = 0;

  // The projector of `model` (projector_model.h) for a geometry and a volume, on host
  // arrays (projector.h). INVALID_ARGUMENT when the model does not take the geometry's
  // kind or this particular geometry (naming the model and the kind), or when the geometry
  // does not fit the volume (VectorGeometry::CheckAgainstVolume).
  virtual absl::StatusOr<std::unique_ptr<Projector>> MakeProjector(
      const Geometry& geometry, const VolumeGeometry& volume_geometry,
      ProjectorModel model) = 0;

  // Thin helpers over MakeProjector for one call each (the projector is made per call).
  // 2D parallel beams, Joseph's exact-transpose pair (kJosephExactTranspose2D on the
  // geometry's one-row vector form): projections (num_views, 1, num_detectors) = A volume
  // (1, ny, nx), and volume = A^T projections. Overwrite their outputs.
  absl::Status ForwardProject(const ParallelGeometry2D& geometry,
                              const VolumeGeometry& volume_geometry, const Array3D& volume,
                              Array3D& projections);
  absl::Status BackProject(const ParallelGeometry2D& geometry,
                           const VolumeGeometry& volume_geometry, const Array3D& projections,
                           Array3D& volume);
  // Any VectorGeometry: projections (views, rows, columns) = A volume (nz, ny, nx), Joseph.
  absl::Status ForwardProject(const VectorGeometry& geometry,
                              const VolumeGeometry& volume_geometry, const Array3D& volume,
                              Array3D& projections);
  // volume = B projections, voxel-driven, weighted as asked (kNone: kVoxelDriven, kFdk:
  // kVoxelDrivenFdk, kMatched: kJoseph's back projection).
  absl::Status BackProject(const VectorGeometry& geometry, const VolumeGeometry& volume_geometry,
                           const Array3D& projections, BackProjectionWeighting weighting,
                           Array3D& volume);
  // Filters every detector row in place with filter.response() (zero-padded to
  // filter.padded_length()). projections.dims().d2 must equal filter.num_detectors().
  virtual absl::Status FilterRows(const RampFilter& filter, Array3D& projections) = 0;

  // A filtered back projection's whole per-view work (FDK, parallel-beam FBP) in one call:
  //   volume = B_weighting(FilterRows(filter, weights * projections))
  // (filtered_back_projection_weights.h). The default composes the operators above on a
  // host copy of the projections; a device backend overrides it to upload the projections
  // once (and only the detector rows the volume, e.g. a z-slab, projects onto), weight and
  // filter them on the device and back project from there. INVALID_ARGUMENT as the
  // operators, and for weights of the wrong size.
  virtual absl::Status FilterAndBackProject(const VectorGeometry& geometry,
                                            const VolumeGeometry& volume_geometry,
                                            const Array3D& projections, const RampFilter& filter,
                                            const FilteredBackProjectionWeights& weights,
                                            BackProjectionWeighting weighting, Array3D& volume);
  // The same with the volume written to volume_values (volume_geometry.dims() values,
  // z-major, owned by the caller): a z-slab's place in a larger result, so that several
  // devices write their slabs where they belong without a second copy. The default
  // reconstructs into an array of its own and copies; a device backend overrides it to
  // download straight there.
  virtual absl::Status FilterAndBackProjectInto(const VectorGeometry& geometry,
                                                const VolumeGeometry& volume_geometry,
                                                const Array3D& projections,
                                                const RampFilter& filter,
                                                const FilteredBackProjectionWeights& weights,
                                                BackProjectionWeighting weighting,
                                                float* volume_values);
  // The same fed with views in order as they arrive (filter_and_back_project_stream.h). The
  // default keeps the views in a host array and calls FilterAndBackProject at Finish; a
  // device backend overrides it to weight, filter and back project each chunk of views as
  // it comes, with the volume kept on the device. INVALID_ARGUMENT as FilterAndBackProject
  // (weights of the wrong size, a filter for another detector width).
  virtual absl::StatusOr<std::unique_ptr<FilterAndBackProjectStream>> BeginFilterAndBackProject(
      const VectorGeometry& geometry, const VolumeGeometry& volume_geometry,
      const RampFilter& filter, const FilteredBackProjectionWeights& weights,
      BackProjectionWeighting weighting);
  // Whether an algorithm should call FilterAndBackProject per slab rather than filter all
  // projections once with FilterRows and call BackProject per slab: true where the data
  // must travel to a device (one transfer instead of three); the results agree either way.
  virtual bool PrefersFilterAndBackProject() const { return false; }

  // Radon FBP's filtering and weighted back projection on this backend
  // (radon_operators.h).
  virtual std::unique_ptr<RadonOperators> MakeRadonOperators() = 0;

  // The operators on arrays that stay on this backend's device (resident_operators.h), for
  // the iterative methods. The default keeps them in host memory and projects with this
  // backend's host-array operators (host_resident_operators.h); a device backend
  // overrides it. The backend must outlive the result.
  virtual absl::StatusOr<std::unique_ptr<ResidentOperators>> MakeResidentOperators();
};

}  // namespace tomo::core
