// SeparableFootprintProjector: the separable-footprint pair (trapezoid transaxial,
// rectangle axial, amplitude A1; core/statistical/separable_footprint_math.h has the model)
// for cone beams on a flat detector whose columns are horizontal and rows run along the z
// axis: circular and helical source paths as MakeCircularCone and MakeHelicalCone build
// them, with any detector offsets, spacings and volume voxel sizes and centres.
//
// Units as the other projectors: volume values per mm, projections dimensionless line
// integrals (mm of path times 1/mm). Volumes are Array3D (z, y, x), projections (view,
// row, column). Forward and Back are an exact adjoint pair (the same weights), computed in
// float64, on ParallelFor threads; the object is immutable and may be shared by threads.
// The transaxial footprint is computed once per (x, y) column and view and serves every z.
//
//   TOMO_ASSIGN_OR_RETURN(auto sf, SeparableFootprintProjector::Create(geometry, volume));
//   TOMO_ASSIGN_OR_RETURN(Array3D projections, sf.Forward(x));
//   std::vector<FootprintEntry> touched = sf.VoxelFootprint(ix, iy, iz);
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/data/array3d.h"
#include "core/geometry/vector_geometry.h"
#include "core/geometry/volume_geometry.h"
#include "core/statistical/separable_footprint_math.h"

namespace tomo::core::statistical {

using SfView = SfViewT<double>;
using SfViewF = SfViewT<float>;
using SfColumn = SfColumnT<double>;
using SfAxial = SfAxialT<double>;

// One detector pixel a voxel touches, with the system-matrix element a_ij.
struct FootprintEntry {
  int64_t view = 0, row = 0, column = 0;
  double weight = 0;
};

class SeparableFootprintProjector {
 public:
  // Tolerance on the detector's orientation: |u_z| / |u|, |v_x| / |v| and |v_y| / |v|.
  static constexpr double kOrientationTolerance = 1e-6;

  // INVALID_ARGUMENT, naming the view, field and value and why the model cannot take it,
  // when: the beam is parallel (the model here is for cone beams); the detector is
  // cylindrical (the trapezoid assumes a flat detector); a view's u has a z part or its v
  // a part off the z axis (the rows must be parallel to the axis for the footprint to
  // separate into a transaxial and an axial part); the source lies in the detector plane;
  // a voxel corner of the volume is not in front of the source in some view (source inside
  // or beside the volume); or geometry.CheckAgainstVolume fails.
  static absl::StatusOr<SeparableFootprintProjector> Create(const VectorGeometry& geometry,
                                                            const VolumeGeometry& volume);

  const VolumeGeometry& volume() const { return volume_; }
  int64_t num_views() const { return static_cast<int64_t>(views_.size()); }
  int64_t rows() const { return rows_; }
  int64_t columns() const { return columns_; }
  Dims3 projection_dims() const { return {num_views(), rows_, columns_}; }
  const std::vector<SfView>& views() const { return views_; }
  // The same in float32, for the device.
  std::vector<SfViewF> FloatViews() const;

  // The transaxial footprint of column (ix, iy) in a view, and the axial part of slice iz.
  SfColumn Column(int64_t view, int64_t ix, int64_t iy) const;
  SfAxial Axial(const SfColumn& column, int64_t iz) const;

  // Every detector pixel voxel (ix, iy, iz) touches with a weight > 0, by view, row, column.
  std::vector<FootprintEntry> VoxelFootprint(int64_t ix, int64_t iy, int64_t iz) const;

  // INVALID_ARGUMENT when volume.dims() (resp. projections.dims()) is not the expected shape.
  absl::StatusOr<Array3D> Forward(const Array3D& volume) const;
  absl::StatusOr<Array3D> Back(const Array3D& projections) const;

 private:
  SeparableFootprintProjector(VolumeGeometry volume, int64_t rows, int64_t columns,
                              std::vector<SfView> views)
      : volume_(volume), rows_(rows), columns_(columns), views_(std::move(views)) {}
  VolumeGeometry volume_;
  int64_t rows_, columns_;
  std::vector<SfView> views_;
};

}  // namespace tomo::core::statistical
