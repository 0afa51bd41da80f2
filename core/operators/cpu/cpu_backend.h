// CpuBackend: the reference implementation of Backend (see backend.h for the operators'
// definitions). Plain loops in float32 with float64 where sums are long, split across
// threads by ParallelFor; ramp filtering with FFTW (single precision, plans made per call
// under FFTW's planner lock). What every CI test runs and what CUDA is compared with.
#pragma once

#include <string>

#include "core/operators/backend.h"

namespace tomo::core {

class CpuBackend final : public Backend {
 public:
  // threads <= 0: DefaultThreadCount().
  explicit CpuBackend(int threads = 0);

  std::string name() const override { return "cpu"; }
  absl::Status ForwardProject(const ParallelGeometry2D& geometry,
                              const VolumeGeometry& volume_geometry, const Array3D& volume,
                              Array3D& projections) override;
  absl::Status BackProject(const ParallelGeometry2D& geometry,
                           const VolumeGeometry& volume_geometry, const Array3D& projections,
                           Array3D& volume) override;
  // Any VectorGeometry; defined in cpu_vector_projector.cc.
  absl::Status ForwardProject(const VectorGeometry& geometry,
                              const VolumeGeometry& volume_geometry, const Array3D& volume,
                              Array3D& projections) override;
  absl::Status BackProject(const VectorGeometry& geometry, const VolumeGeometry& volume_geometry,
                           const Array3D& projections, BackProjectionWeighting weighting,
                           Array3D& volume) override;
  absl::Status FilterRows(const RampFilter& filter, Array3D& projections) override;
  // Host memory, these projectors, this thread count (host_resident_operators.h).
  absl::StatusOr<std::unique_ptr<ResidentOperators>> MakeResidentOperators() override;

 private:
  int threads_;
};

}  // namespace tomo::core
