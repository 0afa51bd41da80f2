// Backend: the operators that algorithms are written over, implemented once per kind of
// device (CpuBackend is the reference; CudaBackend must agree with it, see
// tests/core/operators/cuda). Algorithms never include a device header.
//
// Projector: Joseph's ray-driven method. For each ray, step one pixel at a time along the
// image axis the ray is closest to (y when |cos theta| >= |sin theta|, else x), linearly
// interpolate between the two nearest pixels across it (pixels outside the image count as
// zero) and weight by the path length per step, pixel size / |direction component|.
// BackProject is the exact transpose of ForwardProject (<A x, y> = <x, A^T y> up to
// float rounding), evaluated voxel by voxel (a gather: no atomics), so it serves both the
// iterative methods and FBP.
//
// Thread safety: one Backend serves one job at a time; calls are synchronous (data are
// host arrays, results are complete when the call returns).
// Errors: INVALID_ARGUMENT when array dims do not match the geometry; RESOURCE_EXHAUSTED
// when the device cannot hold the data; INTERNAL for device failures, naming the call.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "core/data/array3d.h"
#include "core/filters/ramp_filter.h"
#include "core/geometry/parallel_geometry_2d.h"
#include "core/geometry/volume_geometry.h"

namespace tomo::core {

class Backend {
 public:
  virtual ~Backend() = default;
  // "cpu", "cuda:0", ...
  virtual std::string name() const = 0;

  // projections (num_views, 1, num_detectors) = A volume (1, ny, nx). Overwrites.
  virtual absl::Status ForwardProject(const ParallelGeometry2D& geometry,
                                      const VolumeGeometry& volume_geometry,
                                      const Array3D& volume, Array3D& projections) = 0;
  // volume = A^T projections. Overwrites.
  virtual absl::Status BackProject(const ParallelGeometry2D& geometry,
                                   const VolumeGeometry& volume_geometry,
                                   const Array3D& projections, Array3D& volume) = 0;
  // Filters every detector row in place with filter.response() (zero-padded to
  // filter.padded_length()). projections.dims().d2 must equal filter.num_detectors().
  virtual absl::Status FilterRows(const RampFilter& filter, Array3D& projections) = 0;
};

}  // namespace tomo::core
