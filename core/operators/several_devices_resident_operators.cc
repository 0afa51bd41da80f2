#include "core/operators/several_devices_resident_operators.h"

#include <algorithm>
#include <cstring>
#include <utility>
#include <variant>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/base/status_macros.h"
#include "core/data/dims_check.h"
#include "core/geometry/geometry_subset.h"

namespace tomo::core {

int64_t ViewParts(int64_t views, int64_t devices) {
  return std::max<int64_t>(1, std::min(views, devices));
}

ViewRange ViewPart(int64_t views, int64_t parts, int64_t part) {
  const int64_t first = part * views / parts;
  const int64_t end = (part + 1) * views / parts;
  return {first, end - first};
}

namespace {

// An array of SeveralDevicesResidentOperators: a replica per device (kVolume) or a part of
// the views per device (kProjections; parts.size() = ViewParts(views, devices)).
class SeveralArray final : public ResidentArray {
 public:
  SeveralArray(Dims3 dims, const void* owner, ResidentRole role,
               std::vector<std::unique_ptr<ResidentArray>> parts)
      : ResidentArray(dims, owner), role(role), parts(std::move(parts)) {}
  const ResidentRole role;
  std::vector<std::unique_ptr<ResidentArray>> parts;
};

const SeveralArray& Several(const ResidentArray& a) { return static_cast<const SeveralArray&>(a); }
SeveralArray& Several(ResidentArray& a) { return static_cast<SeveralArray&>(a); }

const char* RoleName(ResidentRole role) {
  return role == ResidentRole::kVolume ? "a volume" : "projections";
}

// The ownership and size checks of every operation, and one role for all its arrays.
absl::Status CheckOperands(const char* operation, const void* owner, const ResidentArray& a,
                           const ResidentArray& b) {
  TOMO_RETURN_IF_ERROR(CheckResidentOperands(operation, owner, a, b));
  if (Several(a).role != Several(b).role) {
    return absl::InvalidArgumentError(absl::StrCat(
        operation, ": arrays of different roles (", RoleName(Several(a).role), " and ",
        RoleName(Several(b).role), "); element-wise operations take arrays of one role"));
  }
  return absl::OkStatus();
}

// The projector of one geometry split by views: part d on device d.
class SeveralProjector final : public ResidentProjector {
 public:
  SeveralProjector(SeveralDevicesResidentOperators& ops,
                   std::vector<std::unique_ptr<ResidentProjector>> parts, Dims3 volume_dims,
                   Dims3 projection_dims)
      : ops_(ops), parts_(std::move(parts)), volume_dims_(volume_dims),
        projection_dims_(projection_dims) {}

  absl::Status Forward(const ResidentArray& volume, ResidentArray& projections) override {
    TOMO_RETURN_IF_ERROR(Check("Forward", volume, projections));
    for (size_t d = 0; d < parts_.size(); ++d) {
      TOMO_RETURN_IF_ERROR(parts_[d]->Forward(*Several(volume).parts[d],
                                              *Several(projections).parts[d]));
    }
    return absl::OkStatus();
  }

  absl::Status Back(const ResidentArray& projections, ResidentArray& volume) override {
    TOMO_RETURN_IF_ERROR(Check("Back", volume, projections));
    for (size_t d = 0; d < parts_.size(); ++d) {
      TOMO_RETURN_IF_ERROR(parts_[d]->Back(*Several(projections).parts[d],
                                           *Several(volume).parts[d]));
    }
    return ops_.ReduceAndBroadcast(static_cast<int64_t>(parts_.size()), volume);
  }

 private:
  absl::Status Check(const char* operation, const ResidentArray& volume,
                     const ResidentArray& projections) const {
    TOMO_RETURN_IF_ERROR(CheckResidentOperands(operation, &ops_, volume, volume));
    TOMO_RETURN_IF_ERROR(CheckResidentOperands(operation, &ops_, projections, projections));
    if (Several(volume).role != ResidentRole::kVolume ||
        Several(projections).role != ResidentRole::kProjections) {
      return absl::InvalidArgumentError(absl::StrCat(
          operation, ": takes a volume and projections, was given ",
          RoleName(Several(volume).role), " as the volume and ",
          RoleName(Several(projections).role), " as the projections"));
    }
    TOMO_RETURN_IF_ERROR(CheckDimsMatch(absl::StrCat(operation, ": volume"), volume.dims(),
                                        volume_dims_, "(z, y, x)"));
    return CheckDimsMatch(absl::StrCat(operation, ": projections"), projections.dims(),
                          projection_dims_, "(views, rows, columns)");
  }

  SeveralDevicesResidentOperators& ops_;
  std::vector<std::unique_ptr<ResidentProjector>> parts_;
  Dims3 volume_dims_, projection_dims_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<SeveralDevicesResidentOperators>>
SeveralDevicesResidentOperators::Create(std::vector<std::unique_ptr<ResidentOperators>> devices) {
  if (devices.empty()) return absl::InvalidArgumentError("devices: none given");
  for (size_t d = 0; d < devices.size(); ++d) {
    if (devices[d] == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("devices[", d, "]: is null"));
    }
  }
  return std::unique_ptr<SeveralDevicesResidentOperators>(
      new SeveralDevicesResidentOperators(std::move(devices)));
}

const ResidentArray* SeveralDevicesResidentOperators::PartOn(const ResidentArray& array,
                                                             int64_t d) const {
  if (array.owner() != this) return nullptr;
  const auto& parts = Several(array).parts;
  if (d < 0 || d >= static_cast<int64_t>(parts.size())) return nullptr;
  return parts[static_cast<size_t>(d)].get();
}

std::string SeveralDevicesResidentOperators::name() const {
  std::vector<std::string> names;
  for (const auto& device : devices_) names.push_back(device->name());
  return absl::StrCat("several(", absl::StrJoin(names, ", "), ")");
}

uint64_t SeveralDevicesResidentOperators::free_bytes() const {
  uint64_t smallest = 0;
  for (const auto& device : devices_) {
    const uint64_t free = device->free_bytes();
    if (free > 0 && (smallest == 0 || free < smallest)) smallest = free;
  }
  return smallest;
}

absl::StatusOr<std::unique_ptr<ResidentArray>> SeveralDevicesResidentOperators::Allocate(
    Dims3 dims, ResidentRole role) {
  if (dims.d0 < 0 || dims.d1 < 0 || dims.d2 < 0) {
    return absl::InvalidArgumentError(absl::StrCat("Allocate: dims ", DimsText(dims)));
  }
  std::vector<std::unique_ptr<ResidentArray>> parts;
  if (role == ResidentRole::kVolume) {
    for (auto& device : devices_) {
      TOMO_ASSIGN_OR_RETURN(auto replica, device->Allocate(dims, role));
      parts.push_back(std::move(replica));
    }
  } else {
    const int64_t count = ViewParts(dims.d0, device_count());
    for (int64_t d = 0; d < count; ++d) {
      const ViewRange range = ViewPart(dims.d0, count, d);
      TOMO_ASSIGN_OR_RETURN(auto part, devices_[static_cast<size_t>(d)]->Allocate(
                                           {range.count, dims.d1, dims.d2}, role));
      parts.push_back(std::move(part));
    }
  }
  return std::unique_ptr<ResidentArray>(
      std::make_unique<SeveralArray>(dims, this, role, std::move(parts)));
}

absl::Status SeveralDevicesResidentOperators::Upload(const Array3D& host,
                                                     ResidentArray& device) {
  TOMO_RETURN_IF_ERROR(CheckResidentOperands("Upload", this, device, device));
  TOMO_RETURN_IF_ERROR(CheckDimsMatch("Upload: host array", host.dims(), device.dims(),
                                      "(the resident array's)"));
  SeveralArray& array = Several(device);
  if (array.role == ResidentRole::kVolume) {
    for (size_t d = 0; d < devices_.size(); ++d) {
      TOMO_RETURN_IF_ERROR(devices_[d]->Upload(host, *array.parts[d]));
    }
    return absl::OkStatus();
  }
  const Dims3 dims = host.dims();
  const int64_t view_size = dims.d1 * dims.d2;
  const int64_t count = static_cast<int64_t>(array.parts.size());
  for (int64_t d = 0; d < count; ++d) {
    const ViewRange range = ViewPart(dims.d0, count, d);
    Array3D views = Array3D::Uninitialized({range.count, dims.d1, dims.d2});
    if (views.size() > 0) {
      std::memcpy(views.data(), host.data() + range.first * view_size,
                  static_cast<size_t>(views.size()) * sizeof(float));
    }
    TOMO_RETURN_IF_ERROR(devices_[static_cast<size_t>(d)]->Upload(views, *array.parts[d]));
  }
  return absl::OkStatus();
}

absl::Status SeveralDevicesResidentOperators::Download(const ResidentArray& device,
                                                       Array3D& host) {
  TOMO_RETURN_IF_ERROR(CheckResidentOperands("Download", this, device, device));
  TOMO_RETURN_IF_ERROR(CheckDimsMatch("Download: host array", host.dims(), device.dims(),
                                      "(the resident array's)"));
  const SeveralArray& array = Several(device);
  if (array.role == ResidentRole::kVolume) return devices_[0]->Download(*array.parts[0], host);
  const Dims3 dims = host.dims();
  const int64_t view_size = dims.d1 * dims.d2;
  const int64_t count = static_cast<int64_t>(array.parts.size());
  for (int64_t d = 0; d < count; ++d) {
    const ViewRange range = ViewPart(dims.d0, count, d);
    Array3D views = Array3D::Uninitialized({range.count, dims.d1, dims.d2});
    TOMO_RETURN_IF_ERROR(devices_[static_cast<size_t>(d)]->Download(*array.parts[d], views));
    if (views.size() > 0) {
      std::memcpy(host.data() + range.first * view_size, views.data(),
                  static_cast<size_t>(views.size()) * sizeof(float));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<ResidentProjector>> SeveralDevicesResidentOperators::MakeProjector(
    const Geometry& geometry, const VolumeGeometry& volume_geometry, ProjectorModel model) {
  const Dims3 projection_dims = ProjectionDims(geometry);
  const int64_t count = ViewParts(projection_dims.d0, device_count());
  std::vector<std::unique_ptr<ResidentProjector>> parts;
  for (int64_t d = 0; d < count; ++d) {
    const ViewRange range = ViewPart(projection_dims.d0, count, d);
    TOMO_ASSIGN_OR_RETURN(const Geometry part,
                          SubsetGeometry(geometry, ViewRangeList(range.first, range.count)));
    TOMO_ASSIGN_OR_RETURN(auto projector, devices_[static_cast<size_t>(d)]->MakeProjector(
                                              part, volume_geometry, model));
    parts.push_back(std::move(projector));
  }
  return std::unique_ptr<ResidentProjector>(std::make_unique<SeveralProjector>(
      *this, std::move(parts), volume_geometry.dims(), projection_dims));
}

absl::Status SeveralDevicesResidentOperators::ReduceAndBroadcast(int64_t partials,
                                                                 ResidentArray& volume) {
  TOMO_RETURN_IF_ERROR(CheckResidentOperands("ReduceAndBroadcast", this, volume, volume));
  SeveralArray& array = Several(volume);
  if (array.role != ResidentRole::kVolume) {
    return absl::InvalidArgumentError("ReduceAndBroadcast: takes a volume, was given projections");
  }
  if (partials < 1 || partials > device_count()) {
    return absl::InvalidArgumentError(absl::StrCat("ReduceAndBroadcast: partials ", partials,
                                                   " out of range [1, ", device_count(), "]"));
  }
  ResidentOperators& first = *devices_[0];
  ResidentArray& sum = *array.parts[0];
  if (partials > 1) {
    const Dims3 dims = volume.dims();
    std::unique_ptr<ResidentArray>& scratch = scratch_[{dims.d0, dims.d1, dims.d2}];
    if (scratch == nullptr) {
      TOMO_ASSIGN_OR_RETURN(scratch, first.Allocate(dims, ResidentRole::kVolume));
    }
    for (int64_t d = 1; d < partials; ++d) {
      TOMO_RETURN_IF_ERROR(first.CopyFromPeer(*devices_[static_cast<size_t>(d)],
                                              *array.parts[static_cast<size_t>(d)], *scratch));
      TOMO_RETURN_IF_ERROR(first.Axpby(1.0f, *scratch, 1.0f, sum));
    }
  }
  for (size_t d = 1; d < devices_.size(); ++d) {
    TOMO_RETURN_IF_ERROR(devices_[d]->CopyFromPeer(first, sum, *array.parts[d]));
  }
  return absl::OkStatus();
}

absl::Status SeveralDevicesResidentOperators::Fill(float value, ResidentArray& x) {
  TOMO_RETURN_IF_ERROR(CheckOperands("Fill", this, x, x));
  SeveralArray& xs = Several(x);
  for (size_t d = 0; d < xs.parts.size(); ++d) {
    TOMO_RETURN_IF_ERROR(devices_[d]->Fill(value, *xs.parts[d]));
  }
  return absl::OkStatus();
}

absl::Status SeveralDevicesResidentOperators::Axpby(float a, const ResidentArray& x, float b,
                                                    ResidentArray& y) {
  TOMO_RETURN_IF_ERROR(CheckOperands("Axpby", this, x, y));
  const SeveralArray& xs = Several(x);
  SeveralArray& ys = Several(y);
  for (size_t d = 0; d < ys.parts.size(); ++d) {
    TOMO_RETURN_IF_ERROR(devices_[d]->Axpby(a, *xs.parts[d], b, *ys.parts[d]));
  }
  return absl::OkStatus();
}

absl::Status SeveralDevicesResidentOperators::Multiply(const ResidentArray& w,
                                                       ResidentArray& y) {
  TOMO_RETURN_IF_ERROR(CheckOperands("Multiply", this, w, y));
  const SeveralArray& ws = Several(w);
  SeveralArray& ys = Several(y);
  for (size_t d = 0; d < ys.parts.size(); ++d) {
    TOMO_RETURN_IF_ERROR(devices_[d]->Multiply(*ws.parts[d], *ys.parts[d]));
  }
  return absl::OkStatus();
}

absl::Status SeveralDevicesResidentOperators::AddScaledQuotient(
    float a, const ResidentArray& d, const ResidentArray& s, float epsilon, float lower,
    float upper, ResidentArray& x) {
  TOMO_RETURN_IF_ERROR(CheckOperands("AddScaledQuotient", this, d, x));
  TOMO_RETURN_IF_ERROR(CheckOperands("AddScaledQuotient", this, s, x));
  const SeveralArray& ds = Several(d);
  const SeveralArray& ss = Several(s);
  SeveralArray& xs = Several(x);
  for (size_t k = 0; k < xs.parts.size(); ++k) {
    TOMO_RETURN_IF_ERROR(devices_[k]->AddScaledQuotient(a, *ds.parts[k], *ss.parts[k], epsilon,
                                                        lower, upper, *xs.parts[k]));
  }
  return absl::OkStatus();
}

absl::Status SeveralDevicesResidentOperators::InvertGuarded(float epsilon, ResidentArray& x) {
  TOMO_RETURN_IF_ERROR(CheckOperands("InvertGuarded", this, x, x));
  SeveralArray& xs = Several(x);
  for (size_t d = 0; d < xs.parts.size(); ++d) {
    TOMO_RETURN_IF_ERROR(devices_[d]->InvertGuarded(epsilon, *xs.parts[d]));
  }
  return absl::OkStatus();
}

absl::Status SeveralDevicesResidentOperators::Clamp(float lower, float upper, ResidentArray& x) {
  TOMO_RETURN_IF_ERROR(CheckOperands("Clamp", this, x, x));
  SeveralArray& xs = Several(x);
  for (size_t d = 0; d < xs.parts.size(); ++d) {
    TOMO_RETURN_IF_ERROR(devices_[d]->Clamp(lower, upper, *xs.parts[d]));
  }
  return absl::OkStatus();
}

absl::StatusOr<double> SeveralDevicesResidentOperators::Dot(const ResidentArray& a,
                                                            const ResidentArray& b) {
  TOMO_RETURN_IF_ERROR(CheckOperands("Dot", this, a, b));
  const SeveralArray& as = Several(a);
  const SeveralArray& bs = Several(b);
  // Replicas are identical: device 0's alone.
  const size_t count = as.role == ResidentRole::kVolume ? 1 : as.parts.size();
  double total = 0;
  for (size_t d = 0; d < count; ++d) {
    TOMO_ASSIGN_OR_RETURN(const double part, devices_[d]->Dot(*as.parts[d], *bs.parts[d]));
    total += part;
  }
  return total;
}

absl::Status SeveralDevicesResidentOperators::AccumulateDot(const ResidentArray& a,
                                                            const ResidentArray& b) {
  TOMO_RETURN_IF_ERROR(CheckOperands("AccumulateDot", this, a, b));
  const SeveralArray& as = Several(a);
  const SeveralArray& bs = Several(b);
  const size_t count = as.role == ResidentRole::kVolume ? 1 : as.parts.size();
  for (size_t d = 0; d < count; ++d) {
    TOMO_RETURN_IF_ERROR(devices_[d]->AccumulateDot(*as.parts[d], *bs.parts[d]));
  }
  return absl::OkStatus();
}

absl::StatusOr<double> SeveralDevicesResidentOperators::TakeAccumulatedDot() {
  double total = 0;
  for (auto& device : devices_) {
    TOMO_ASSIGN_OR_RETURN(const double part, device->TakeAccumulatedDot());
    total += part;
  }
  return total;
}

}  // namespace tomo::core
