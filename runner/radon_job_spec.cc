#include "runner/radon_job_spec.h"

#include <algorithm>
#include <string>
#include <type_traits>
#include <variant>

#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"

namespace tomo::server {
namespace {

namespace pb = ::tomoserve::v1;

constexpr absl::string_view kPath = "geometry.radon_3d";

absl::Status Invalid(absl::string_view field, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(kPath, field.empty() ? "" : ".", field, ": ", what));
}

// The core's "field: ..." message with the proto path in front.
absl::Status Prefixed(const absl::Status& status) {
  if (status.ok()) return status;
  return absl::Status(status.code(), absl::StrCat(kPath, ".", status.message()));
}

absl::Status CheckCount(absl::string_view field, uint64_t count, uint32_t max_views) {
  const uint64_t most = std::min<uint64_t>(max_views, core::kMaxRadonDirections);
  if (count < 1 || count > most) {
    return Invalid(field, absl::StrCat(count, " directions is out of range [1, ", most, "]",
                                       most == max_views ? " (the server's limit, --max_views)"
                                                         : ""));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<core::RadonGeometry> ValidateRadon3D(const pb::Radon3D& radon, uint32_t max_views) {
  const int given = (radon.directions_size() > 0 ? 1 : 0) +
                    (radon.has_uniform_solid_angle() ? 1 : 0) +
                    (radon.has_equal_linear_angle() ? 1 : 0);
  if (given != 1) {
    return Invalid("", absl::StrCat(given == 0 ? "none" : "more than one",
                                    " of directions, uniform_solid_angle, equal_linear_angle "
                                    "is set; give exactly one"));
  }
  const int64_t samples = radon.num_samples();
  const double spacing = radon.sample_spacing_mm();
  if (radon.has_uniform_solid_angle()) {
    const uint32_t count = radon.uniform_solid_angle().count();
    TOMO_RETURN_IF_ERROR(CheckCount("uniform_solid_angle.count", count, max_views));
    absl::StatusOr<core::RadonGeometry> geometry =
        core::MakeUniformSolidAngleRadon(count, samples, spacing);
    if (!geometry.ok()) return Prefixed(geometry.status());
    return geometry;
  }
  if (radon.has_equal_linear_angle()) {
    const pb::RadonEqualLinearAngle& ela = radon.equal_linear_angle();
    if (ela.n_phi() < 1) return Invalid("equal_linear_angle.n_phi", "0 is out of range [1, ...)");
    if (ela.n_theta() < 1) {
      return Invalid("equal_linear_angle.n_theta", "0 is out of range [1, ...)");
    }
    const uint64_t count = uint64_t{ela.n_phi()} * uint64_t{ela.n_theta()};
    TOMO_RETURN_IF_ERROR(CheckCount("equal_linear_angle", count, max_views));
    absl::StatusOr<core::RadonGeometry> geometry =
        core::MakeEqualLinearAngleRadon(ela.n_phi(), ela.n_theta(), samples, spacing);
    if (!geometry.ok()) return Prefixed(geometry.status());
    return geometry;
  }
  TOMO_RETURN_IF_ERROR(CheckCount("directions", static_cast<uint64_t>(radon.directions_size()),
                                  max_views));
  core::RadonGeometry geometry;
  geometry.directions.reserve(static_cast<size_t>(radon.directions_size()));
  for (const pb::RadonDirection& d : radon.directions()) {
    geometry.directions.push_back({d.phi_rad(), d.theta_rad(), d.weight_sr()});
  }
  geometry.num_samples = samples;
  geometry.sample_spacing_mm = spacing;
  TOMO_RETURN_IF_ERROR(Prefixed(core::ValidateRadonGeometry(geometry)));
  return geometry;
}

absl::Status CheckRadon3DInput(const pb::ProjectionInput& input) {
  if (input.encoding() != pb::DATA_ENCODING_FLOAT32_LE &&
      input.encoding() != pb::DATA_ENCODING_FLOAT32_BE) {
    return absl::InvalidArgumentError(absl::StrCat(
        "input.encoding: ", pb::DataEncoding_Name(input.encoding()),
        " is not supported with geometry.radon_3d; plane integrals are DATA_ENCODING_FLOAT32_LE "
        "or _FLOAT32_BE values (directions, 1, samples)"));
  }
  if (!input.files().empty()) {
    return absl::InvalidArgumentError(
        "input.files: geometry.radon_3d takes one raw file of plane integrals, not a file list "
        "(no dark or flat fields)");
  }
  if (input.preprocessing().negative_log()) {
    return absl::InvalidArgumentError(
        "input.preprocessing.negative_log: true does not apply to geometry.radon_3d; plane "
        "integrals are uploaded as they are");
  }
  return absl::OkStatus();
}

void UseRadonProjector(core::AlgorithmOptions& options) {
  std::visit(
      [](auto& typed) {
        using Options = std::decay_t<decltype(typed)>;
        if constexpr (!std::is_same_v<Options, core::FbpOptions> &&
                      !std::is_same_v<Options, core::StoredArtOptions> &&
                      !std::is_same_v<Options, core::IcdAlgorithmOptions>) {
          typed.iterative.projector = core::ProjectorModel::kRadonPlaneIntegral;
        }
      },
      options);
}

}  // namespace tomo::server
