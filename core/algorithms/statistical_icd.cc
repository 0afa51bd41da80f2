#include "core/algorithms/statistical_icd.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "core/algorithms/filtered_back_projection.h"
#include "core/base/status_macros.h"
#include "core/data/dims_check.h"
#include "core/devices/devices.h"
#include "core/statistical/icd.h"

namespace tomo::core {
namespace {

namespace st = statistical;

// The device a backend runs on: "cuda:N" a CUDA device, anything else the CPU.
DeviceInfo DeviceOf(const Backend& backend) {
  absl::string_view name = backend.name();
  int index = -1;
  if (absl::ConsumePrefix(&name, "cuda:") && absl::SimpleAtoi(name, &index) && index >= 0) {
    DeviceInfo device;
    device.kind = DeviceKind::kCuda;
    device.index = index;
    device.id = backend.name();
    return device;
  }
  return CpuDevice();
}

// w = I0 exp(-y), I0 from the photon statistics or the flat-field count.
absl::StatusOr<Array3D> ExpectedPhotons(const IcdAlgorithmOptions& options,
                                        const Array3D& projections) {
  const Dims3 dims = projections.dims();
  const Array3D* stats = options.photon_statistics.get();
  const bool per_view = stats != nullptr && stats->size() > 0;
  if (per_view && stats->dims().d0 != dims.d0) {
    return absl::InvalidArgumentError(
        absl::StrCat("photon statistics: ", stats->dims().d0, " views, the projections have ",
                     dims.d0));
  }
  if (!per_view && !(std::isfinite(options.flat_field_photons) &&
                     options.flat_field_photons > 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "flat_field_photons: ", options.flat_field_photons,
        " must be a finite value > 0 when the input carries no photon statistics"));
  }
  const bool per_column = per_view && stats->dims().d2 == dims.d2;
  Array3D weights = Array3D::Uninitialized(dims);
  for (int64_t v = 0; v < dims.d0; ++v) {
    for (int64_t r = 0; r < dims.d1; ++r) {
      for (int64_t c = 0; c < dims.d2; ++c) {
        const double i0 = !per_view ? options.flat_field_photons
                                    : stats->at(v, 0, per_column ? c : 0);
        const double w = i0 * std::exp(-static_cast<double>(projections.at(v, r, c)));
        if (!std::isfinite(w) || w < 0) {
          return absl::InvalidArgumentError(absl::StrCat(
              "weights: view ", v, ", row ", r, ", column ", c, ": ", w,
              " (photons ", i0, ", line integral ", projections.at(v, r, c),
              ") is not a finite value >= 0"));
        }
        weights.at(v, r, c) = static_cast<float>(w);
      }
    }
  }
  return weights;
}

class StatisticalIcd final : public Algorithm {
 public:
  absl::StatusOr<Array3D> Run(const ReconstructionRequest& request, const Array3D& projections,
                              Backend& backend, const RunContext& context) const override {
    const auto* options = std::get_if<IcdAlgorithmOptions>(&request.algorithm);
    if (options == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(
          "algorithm: icd was given the options of ", AlgorithmName(request.algorithm)));
    }
    const auto* geometry = std::get_if<VectorGeometry>(&request.geometry);
    if (geometry == nullptr) {
      return UnsupportedGeometryKind("algorithm icd", request.geometry,
                                     "flat-detector cone beams");
    }
    TOMO_RETURN_IF_ERROR(st::ValidateIcdOptions(options->icd));
    TOMO_RETURN_IF_ERROR(CheckDimsMatch("projections", projections.dims(),
                                        geometry->projection_dims(), "(views, rows, columns)"));
    const DeviceInfo device = DeviceOf(backend);
    if (device.kind == DeviceKind::kCpu && context.memory_budget_bytes > 0) {
      const uint64_t needed = st::IcdHostBytes(request.volume, projections.dims(),
                                               options->icd.columns_per_step);
      if (needed > context.memory_budget_bytes) {
        return absl::ResourceExhaustedError(absl::StrCat(
            "icd: needs ", needed, " bytes (the volume z fastest, the residual, the "
            "weights and the partner search of columns_per_step ",
            options->icd.columns_per_step, ") but the memory budget is ",
            context.memory_budget_bytes, " bytes"));
      }
    }
    TOMO_ASSIGN_OR_RETURN(st::SeparableFootprintProjector projector,
                          st::SeparableFootprintProjector::Create(*geometry, request.volume));
    TOMO_ASSIGN_OR_RETURN(Array3D weights, ExpectedPhotons(*options, projections));
    Array3D start;
    if (options->start_from_fdk) {
      RunContext quiet = context;
      quiet.on_progress = nullptr;  // the iterations report progress; the start is setup
      TOMO_ASSIGN_OR_RETURN(start, Fdk(*geometry, request.volume, projections, FdkOptions{},
                                       backend, quiet));
      for (int64_t i = 0; i < start.size(); ++i) {
        start.data()[i] = std::max(start.data()[i], 0.0f);  // ICD keeps x >= 0
      }
    }
    TOMO_ASSIGN_OR_RETURN(st::IcdResult result,
                          st::ReconstructIcd(projector, projections, weights,
                                             options->start_from_fdk ? &start : nullptr,
                                             options->icd, device, context));
    return std::move(result.volume);
  }

  uint64_t MinimumDeviceBytes(const ReconstructionRequest& request) const override {
    if (!std::holds_alternative<IcdAlgorithmOptions>(request.algorithm)) return 0;
    const Size3& size = request.volume.size();
    return st::IcdDeviceBytes(request.volume, ProjectionDims(request.geometry),
                              size.x * size.y);
  }
};

}  // namespace

std::unique_ptr<Algorithm> MakeStatisticalIcdAlgorithm() {
  return std::make_unique<StatisticalIcd>();
}

}  // namespace tomo::core
