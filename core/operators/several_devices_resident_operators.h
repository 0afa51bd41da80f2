// SeveralDevicesResidentOperators: ResidentOperators (resident_operators.h) over the
// ResidentOperators of several devices, so that one run of an iterative method
// (core/algorithms/sirt.h, block_iterative.h, cgls.h) uses all of them. Device-neutral: it
// sees its parts only through ResidentOperators (CPU parts in the tests, CUDA parts on a
// machine with several GPUs).
//
// How the work is split (docs/iterative.md, "Several GPUs"):
//   - ResidentRole::kVolume arrays are replicated: one full copy per device, kept bit
//     identical (every element-wise operation runs on every replica with the same inputs);
//   - ResidentRole::kProjections arrays are split by views (dim d0) into P = min(N, views)
//     parts (at least 1): part d, on device d, holds views [d views / P, (d + 1) views / P).
//     With fewer views than devices (SART's one-view blocks) devices P.. hold no part;
//   - a projector of a geometry of n views is split the same way (each part a geometry of
//     its views: SubsetGeometry's rule, VectorGeometry or RadonGeometry). Forward: each
//     device projects its views from its own replica, no communication. Back: each device
//     back projects its views into its replica (a partial sum), then device 0 receives the
//     other partials one by one in device order (CopyFromPeer into a scratch volume on
//     device 0) and adds each (Axpby), and every other device receives device 0's sum
//     (CopyFromPeer). So one Back moves (P - 1) + (N - 1) volumes between devices and the
//     replicas end identical; this is all the communication of an iteration.
//   - Dot: replicated arrays on device 0 alone; split arrays: the parts' float64 dots
//     summed in device order. AccumulateDot likewise, each device keeping its running
//     total; TakeAccumulatedDot adds the devices' totals in device order.
//   - Upload: every replica / each part its views; Download: device 0's replica / the parts'
//     views reassembled in order.
// Element-wise operations and dots whose arrays have different roles are INVALID_ARGUMENT
// naming the operation (a volume and projections never meet outside a projector).
//
// Results differ from one device's by float rounding only: the back projection sums the
// views in another order (partial sums per device, then added), the dots add per-device
// sums. docs/iterative.md gives the tolerance the tests hold it to.
//
// free_bytes: the smallest of the devices' (0 only when none reports a limit). The
// algorithms' budget check counts every projection on one device, so it is conservative here.
// Threads: as ResidentOperators (one run, one thread); the parts' calls are made in device
// order from that thread, and a device implementation queues them without waiting, so the
// devices compute at the same time.
//
//   std::vector<std::unique_ptr<ResidentOperators>> parts;  // one per backend
//   for (Backend* b : backends) parts.push_back(b->MakeResidentOperators().value());
//   TOMO_ASSIGN_OR_RETURN(auto ops, SeveralDevicesResidentOperators::Create(std::move(parts)));
//   TOMO_ASSIGN_OR_RETURN(IterativeResult r, Sirt(geometry, volume, b, options, *ops, ctx));
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/operators/resident_operators.h"

namespace tomo::core {

// The views of part d of n views split into `parts` parts: [first, first + count).
struct ViewRange {
  int64_t first = 0;
  int64_t count = 0;
};
// The number of parts n views are split into over `devices` devices: min(devices, n), at
// least 1.
int64_t ViewParts(int64_t views, int64_t devices);
ViewRange ViewPart(int64_t views, int64_t parts, int64_t part);

class SeveralDevicesResidentOperators final : public ResidentOperators {
 public:
  // devices: one ResidentOperators per device, device 0 first; at least one, none null
  // (INVALID_ARGUMENT otherwise). This object owns them; the Backends that made them must
  // outlive it.
  static absl::StatusOr<std::unique_ptr<SeveralDevicesResidentOperators>> Create(
      std::vector<std::unique_ptr<ResidentOperators>> devices);

  int64_t device_count() const { return static_cast<int64_t>(devices_.size()); }
  ResidentOperators& device(int64_t d) { return *devices_[static_cast<size_t>(d)]; }
  // The array of device d that makes up `array` (its replica, or its part of the views);
  // nullptr when device d holds no part of it or `array` is not this object's.
  const ResidentArray* PartOn(const ResidentArray& array, int64_t d) const;

  // "several(cuda:0, cuda:1)".
  std::string name() const override;
  uint64_t free_bytes() const override;
  absl::StatusOr<std::unique_ptr<ResidentArray>> Allocate(
      Dims3 dims, ResidentRole role = ResidentRole::kVolume) override;
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

  // After each device's partial back projection into its replica of `volume` (devices
  // [0, partials)): device 0's replica = the sum of the partials in device order, then
  // every other replica = device 0's. The projectors' reduction; public for the tests.
  absl::Status ReduceAndBroadcast(int64_t partials, ResidentArray& volume);

 private:
  explicit SeveralDevicesResidentOperators(
      std::vector<std::unique_ptr<ResidentOperators>> devices)
      : devices_(std::move(devices)) {}

  std::vector<std::unique_ptr<ResidentOperators>> devices_;
  // Device 0's scratch volume for the reduction, one per dims met.
  std::map<std::tuple<int64_t, int64_t, int64_t>, std::unique_ptr<ResidentArray>> scratch_;
};

}  // namespace tomo::core
