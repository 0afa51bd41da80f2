#include "runner/icd_job_spec.h"

#include <cmath>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "core/statistical/qggmrf_prior.h"

namespace tomo::server {
namespace {

namespace pb = ::tomoserve::v1;
namespace st = ::tomo::core::statistical;

constexpr int64_t kDefaultIterations = 4;

absl::Status Invalid(absl::string_view field, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("algorithm.icd", field.empty() ? "" : ".",
                                                 field, ": ", what));
}

// The kinds the separable-footprint projector takes, checked on the spec.
absl::Status CheckGeometry(const pb::JobSpec& spec, bool start_from_fdk) {
  const pb::Geometry& g = spec.geometry();
  const auto flat = [](pb::DetectorShape shape) {
    return shape != pb::DETECTOR_SHAPE_CYLINDRICAL;
  };
  bool takes = false;
  switch (g.kind_case()) {
    case pb::Geometry::kCone:
      takes = flat(g.cone().detector().shape());
      break;
    case pb::Geometry::kHelical:
      takes = flat(g.helical().cone().detector().shape());
      if (takes && start_from_fdk) {
        return Invalid("start", "ICD_START_FDK (the default) needs a circular orbit; "
                                "geometry.helical needs ICD_START_ZERO");
      }
      break;
    case pb::Geometry::kVectors:
      takes = g.vectors().beam() == pb::BEAM_KIND_CONE && flat(g.vectors().shape());
      break;
    case pb::Geometry::kFromInputFiles:
      takes = true;  // the projector checks the files' detector when the job runs
      break;
    default:
      break;
  }
  if (!takes) {
    return Invalid("", "ICD's separable-footprint projector takes flat-detector cone beams "
                       "(geometry.cone, helical, vectors with BEAM_KIND_CONE, or "
                       "from_input_files)");
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<core::IcdAlgorithmOptions> ValidateStatisticalIcd(
    const pb::StatisticalIcdOptions& given, const pb::JobSpec& spec,
    const core::VolumeGeometry& volume) {
  core::IcdAlgorithmOptions options;
  switch (given.start()) {
    case pb::ICD_START_UNSPECIFIED:
    case pb::ICD_START_FDK:
      options.start_from_fdk = true;
      break;
    case pb::ICD_START_ZERO:
      options.start_from_fdk = false;
      break;
    default:
      return Invalid("start", absl::StrCat(static_cast<int>(given.start()),
                                           " is out of range [0, 2] (ICD_START_FDK, "
                                           "ICD_START_ZERO; 0 means FDK)"));
  }
  TOMO_RETURN_IF_ERROR(CheckGeometry(spec, options.start_from_fdk));
  options.icd.iterations = given.iterations() == 0 ? kDefaultIterations : given.iterations();

  const pb::QggmrfPriorOptions& prior = given.prior();
  st::QggmrfPrior& p = options.icd.prior;
  p = st::DefaultQggmrfPrior(volume);
  if (prior.has_p()) p.p = prior.p();
  if (prior.has_q()) p.q = prior.q();
  if (prior.has_c()) p.c = prior.c();
  if (prior.has_sigma_per_mm()) p.sigma = prior.sigma_per_mm();
  if (!prior.neighbour_weights().empty()) {
    if (prior.neighbour_weights_size() != 26) {
      return Invalid("prior.neighbour_weights",
                     absl::StrCat(prior.neighbour_weights_size(),
                                  " values; expected 26 (one per neighbour) or none"));
    }
    for (int k = 0; k < 26; ++k) p.neighbour_weights[k] = prior.neighbour_weights(k);
  }
  if (absl::Status valid = st::ValidateIcdOptions(options.icd); !valid.ok()) {
    // The core names "prior.q", "iterations", ...: the proto's paths below algorithm.icd.
    std::string message(valid.message());
    if (message.rfind("prior.sigma", 0) == 0) message.replace(0, 11, "prior.sigma_per_mm");
    return absl::InvalidArgumentError(absl::StrCat("algorithm.icd.", message));
  }

  if (given.weights().has_flat_field_photons()) {
    const double photons = given.weights().flat_field_photons();
    if (!(std::isfinite(photons) && photons > 0)) {
      return Invalid("weights.flat_field_photons",
                     absl::StrCat(photons, " is out of range (0, inf); the photons an "
                                           "unattenuated detector pixel detects"));
    }
    options.flat_field_photons = photons;
  } else if (spec.input().encoding() != pb::DATA_ENCODING_DICOM_CT_PD) {
    return Invalid("weights.flat_field_photons",
                   "is unset; only DICOM-CT-PD input carries photon statistics, other inputs "
                   "need the photons an unattenuated detector pixel detects");
  }
  return options;
}

void UsePhotonStatistics(const core::Array3D& photon_statistics,
                         core::AlgorithmOptions& algorithm) {
  auto* icd = std::get_if<core::IcdAlgorithmOptions>(&algorithm);
  if (icd == nullptr || icd->flat_field_photons > 0 || photon_statistics.size() == 0) return;
  icd->photon_statistics = std::make_shared<const core::Array3D>(photon_statistics.Clone());
}

}  // namespace tomo::server
