// Projector: one projector model (projector_model.h) for one (geometry, volume) pair on
// host arrays, made by Backend::MakeProjector. The per-view parameters are computed once
// when it is made; a device backend uploads the data for each call and returns when the
// result is in the host array.
//
// Volumes are Array3D (nz, ny, nx) as the VolumeGeometry; projections (views, rows, columns)
// as ProjectionDims(geometry). INVALID_ARGUMENT when an array's dims do not match;
// RESOURCE_EXHAUSTED when the device cannot hold the data; INTERNAL for device failures.
// Not thread-safe; the Backend that made it must outlive it.
//
//   TOMO_ASSIGN_OR_RETURN(auto projector,
//                         backend.MakeProjector(geometry, volume, ProjectorModel::kJoseph));
//   TOMO_RETURN_IF_ERROR(projector->Forward(x, ax));   // projections = A x, overwritten
//   TOMO_RETURN_IF_ERROR(projector->Back(y, aty));     // volume = A^T y, overwritten
#pragma once

#include "absl/status/status.h"
#include "core/data/array3d.h"
#include "core/operators/projector_model.h"

namespace tomo::core {

class Projector {
 public:
  virtual ~Projector() = default;
  virtual ProjectorModel model() const = 0;
  // projections = A volume (every element written).
  virtual absl::Status Forward(const Array3D& volume, Array3D& projections) = 0;
  // volume = the model's back projection of projections (every voxel written).
  virtual absl::Status Back(const Array3D& projections, Array3D& volume) = 0;
};

}  // namespace tomo::core
