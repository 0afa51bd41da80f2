#include "core/geometry/radon_geometry.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"

namespace tomo::core {
namespace {

constexpr double kPi = 3.14159265358979323846;

std::string DirectionField(size_t i, const char* field) {
  return absl::StrCat("directions[", i, "].", field);
}

// The angle between two unit vectors, accurate for small angles (acos is not).
double AngleBetween(const Vec3& a, const Vec3& b) {
  return std::atan2(Norm(Cross(a, b)), Dot(a, b));
}

// Repeated directions (or opposite ones): every direction enters twice, as n and -n, sorted
// by z; a pair closer than the limit has z within the limit too, so only such neighbours are
// compared. Returns the first offending pair (later, earlier) or (-1, -1).
std::pair<int64_t, int64_t> FindRepeatedDirection(const std::vector<RadonDirection>& directions) {
  struct Entry {
    Vec3 n;
    int64_t index;
  };
  std::vector<Entry> entries;
  entries.reserve(2 * directions.size());
  for (size_t i = 0; i < directions.size(); ++i) {
    const Vec3 n = directions[i].unit();
    entries.push_back({n, static_cast<int64_t>(i)});
    entries.push_back({-n, static_cast<int64_t>(i)});
  }
  std::sort(entries.begin(), entries.end(),
            [](const Entry& a, const Entry& b) { return a.n.z < b.n.z; });
  std::pair<int64_t, int64_t> found{-1, -1};
  // The chord between unit vectors at angle a is 2 sin(a / 2) <= a, so |dz| <= the angle.
  const double limit = kMinRadonDirectionSeparationRad;
  for (size_t i = 0; i < entries.size(); ++i) {
    for (size_t j = i + 1; j < entries.size() && entries[j].n.z - entries[i].n.z <= limit; ++j) {
      if (entries[i].index == entries[j].index) continue;
      if (AngleBetween(entries[i].n, entries[j].n) < limit) {
        const int64_t later = std::max(entries[i].index, entries[j].index);
        const int64_t earlier = std::min(entries[i].index, entries[j].index);
        if (found.first < 0 || later < found.first ||
            (later == found.first && earlier < found.second)) {
          found = {later, earlier};
        }
      }
    }
  }
  return found;
}

}  // namespace

Vec3 RadonDirection::unit() const {
  const double s = std::sin(theta_rad);
  return {s * std::cos(phi_rad), s * std::sin(phi_rad), std::cos(theta_rad)};
}

absl::Status ValidateRadonGeometry(const RadonGeometry& geometry) {
  const size_t count = geometry.directions.size();
  if (count < 1 || static_cast<int64_t>(count) > kMaxRadonDirections) {
    return absl::InvalidArgumentError(
        absl::StrCat("directions: ", count, " directions, allowed [1, ", kMaxRadonDirections, "]"));
  }
  for (size_t i = 0; i < count; ++i) {
    const RadonDirection& d = geometry.directions[i];
    if (!std::isfinite(d.phi_rad) || std::abs(d.phi_rad) > 2 * kPi) {
      return absl::InvalidArgumentError(absl::StrCat(DirectionField(i, "phi_rad"), ": ", d.phi_rad,
                                                     " is not a finite angle in [-2 pi, 2 pi]"));
    }
    if (!std::isfinite(d.theta_rad) || d.theta_rad < 0 || d.theta_rad > kPi) {
      return absl::InvalidArgumentError(absl::StrCat(
          DirectionField(i, "theta_rad"), ": ", d.theta_rad, " is not a finite angle in [0, pi]"));
    }
    if (!std::isfinite(d.weight_sr) || d.weight_sr <= 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          DirectionField(i, "weight_sr"), ": ", d.weight_sr, " must be a finite solid angle > 0"));
    }
  }
  if (geometry.num_samples < 2 || geometry.num_samples > kMaxRadonSamples) {
    return absl::InvalidArgumentError(absl::StrCat("num_samples: ", geometry.num_samples,
                                                   " is out of range [2, ", kMaxRadonSamples, "]"));
  }
  if (!std::isfinite(geometry.sample_spacing_mm) || geometry.sample_spacing_mm <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "sample_spacing_mm: ", geometry.sample_spacing_mm, " must be a finite value > 0"));
  }
  const auto [later, earlier] = FindRepeatedDirection(geometry.directions);
  if (later >= 0) {
    const RadonDirection& a = geometry.directions[static_cast<size_t>(later)];
    const RadonDirection& b = geometry.directions[static_cast<size_t>(earlier)];
    const bool opposite = Dot(a.unit(), b.unit()) < 0;
    return absl::InvalidArgumentError(absl::StrCat(
        "directions[", later, "]: (phi_rad ", a.phi_rad, ", theta_rad ", a.theta_rad, ") ",
        opposite ? "is opposite to" : "repeats", " directions[", earlier, "] (phi_rad ", b.phi_rad,
        ", theta_rad ", b.theta_rad, ") within ", kMinRadonDirectionSeparationRad,
        " rad; directions must be at least that far from each other and from each other's "
        "opposites (the plane integrals at -n are those at n, reflected)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<RadonGeometry> MakeUniformSolidAngleRadon(int64_t count, int64_t num_samples,
                                                         double sample_spacing_mm) {
  if (count < 1 || count > kMaxRadonDirections) {
    return absl::InvalidArgumentError(
        absl::StrCat("count: ", count, " is out of range [1, ", kMaxRadonDirections, "]"));
  }
  RadonGeometry geometry;
  geometry.num_samples = num_samples;
  geometry.sample_spacing_mm = sample_spacing_mm;
  geometry.directions.reserve(static_cast<size_t>(count));
  // The golden angle, pi (3 - sqrt 5): successive directions turn by it, which spreads them
  // evenly in phi for any count. By Archimedes' hat-box theorem, equal steps in z = cos theta
  // are bands of equal area, so the direction at each band's mid-height stands for 2 pi / count.
  const double golden_angle = kPi * (3.0 - std::sqrt(5.0));
  const double weight = 2.0 * kPi / static_cast<double>(count);
  for (int64_t i = 0; i < count; ++i) {
    const double z = 1.0 - (static_cast<double>(i) + 0.5) / static_cast<double>(count);
    const double phi = std::remainder(golden_angle * static_cast<double>(i), 2.0 * kPi);
    geometry.directions.push_back({phi, std::acos(z), weight});
  }
  if (absl::Status status = ValidateRadonGeometry(geometry); !status.ok()) return status;
  return geometry;
}

absl::StatusOr<RadonGeometry> MakeEqualLinearAngleRadon(int64_t num_phi, int64_t num_theta,
                                                        int64_t num_samples,
                                                        double sample_spacing_mm) {
  if (num_phi < 1 || num_phi > kMaxRadonDirections) {
    return absl::InvalidArgumentError(
        absl::StrCat("num_phi: ", num_phi, " is out of range [1, ", kMaxRadonDirections, "]"));
  }
  if (num_theta < 1 || num_theta > kMaxRadonDirections / num_phi) {
    return absl::InvalidArgumentError(absl::StrCat(
        "num_theta: ", num_theta, " is out of range [1, ", kMaxRadonDirections / num_phi,
        "] (num_phi * num_theta <= ", kMaxRadonDirections, ")"));
  }
  RadonGeometry geometry;
  geometry.num_samples = num_samples;
  geometry.sample_spacing_mm = sample_spacing_mm;
  geometry.directions.reserve(static_cast<size_t>(num_phi * num_theta));
  const double dphi = 2.0 * kPi / static_cast<double>(num_phi);
  const double dtheta = 0.5 * kPi / static_cast<double>(num_theta);
  for (int64_t j = 0; j < num_theta; ++j) {
    const double theta = (static_cast<double>(j) + 0.5) * dtheta;
    // The cell's exact area, so that the weights sum to 2 pi (the midpoint rule's
    // sin theta dtheta dphi falls short by a factor sinc(dtheta / 2)).
    const double weight = dphi * 2.0 * std::sin(theta) * std::sin(0.5 * dtheta);
    for (int64_t i = 0; i < num_phi; ++i) {
      geometry.directions.push_back({static_cast<double>(i) * dphi, theta, weight});
    }
  }
  if (absl::Status status = ValidateRadonGeometry(geometry); !status.ok()) return status;
  return geometry;
}

}  // namespace tomo::core
