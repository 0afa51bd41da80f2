// HostResidentOperators: ResidentOperators (resident_operators.h) on host memory, over a
// Backend's host-array projectors. It is CpuBackend's implementation (the reference the
// CUDA one is compared with) and the default of Backend::MakeResidentOperators for a
// backend without its own: correct everywhere, with the host copies such a backend's
// projectors make.
//
// Arrays are Array3D. Element-wise operations run in float32 (x[i] = a * x[i] + ...
// exactly as written, one rounding per operation as on the device); Dot sums in float64,
// in parallel chunks combined in a fixed order (results do not depend on the thread
// count). Calls are synchronous. The role of an array (ResidentRole) changes nothing here.
// CopyFromPeer from another HostResidentOperators copies the host array directly.
//
//   HostResidentOperators ops(cpu_backend);
//   TOMO_ASSIGN_OR_RETURN(auto x, ops.Allocate(volume.dims()));
#pragma once

#include <memory>
#include <string>

#include "core/operators/backend.h"
#include "core/operators/resident_operators.h"

namespace tomo::core {

class HostResidentOperators final : public ResidentOperators {
 public:
  // backend: the projectors; must outlive this object. threads <= 0: DefaultThreadCount().
  explicit HostResidentOperators(Backend& backend, int threads = 0);

  std::string name() const override { return backend_.name(); }
  uint64_t free_bytes() const override { return 0; }
  absl::StatusOr<std::unique_ptr<ResidentArray>> Allocate(
      Dims3 dims, ResidentRole role = ResidentRole::kVolume) override;
  absl::Status CopyFromPeer(ResidentOperators& source_ops, const ResidentArray& source,
                            ResidentArray& target) override;
  absl::Status Upload(const Array3D& host, ResidentArray& device) override;
  absl::Status Download(const ResidentArray& device, Array3D& host) override;
  absl::StatusOr<std::unique_ptr<ResidentProjector>> MakeProjector(
      const Geometry& geometry, const VolumeGeometry& volume_geometry,
      ProjectorModel model) override;
  absl::Status Fill(float value, ResidentArray& x) override;
  absl::Status Axpby(float a, const ResidentArray& x, float b, ResidentArray& y) override;
  absl::Status Multiply(const ResidentArray& w, ResidentArray& y) override;
  absl::Status AddScaledQuotient(float a, const ResidentArray& d, const ResidentArray& s,
                                 float epsilon, float lower, float upper,
                                 ResidentArray& x) override;
  absl::Status InvertGuarded(float epsilon, ResidentArray& x) override;
  absl::Status Clamp(float lower, float upper, ResidentArray& x) override;
  absl::StatusOr<double> Dot(const ResidentArray& a, const ResidentArray& b) override;
  absl::Status AccumulateDot(const ResidentArray& a, const ResidentArray& b) override;
  absl::StatusOr<double> TakeAccumulatedDot() override;

 private:
  Backend& backend_;
  int threads_;
  double accumulated_dot_ = 0;
};

}  // namespace tomo::core
