#include "core/algorithms/reconstruction.h"

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/algorithms/slab_plan.h"
#include "core/base/status_macros.h"
#include "core/data/dims_check.h"
#include "core/algorithms/iterative_algorithms.h"
#include "core/algorithms/fbp_for_geometry.h"
#include "core/algorithms/statistical_icd.h"
#include "core/algorithms/stored_matrix_art.h"
#include "core/geometry/parallel_2d_form.h"

namespace tomo::core {
namespace {

// Names per alternative of AlgorithmOptions; a new alternative fails to compile here
// until it is given a name.
struct NameOf {
  std::string operator()(const FbpOptions&) const { return "fbp"; }
  std::string operator()(const SirtOptions&) const { return "sirt"; }
  std::string operator()(const SartOptions&) const { return "sart"; }
  std::string operator()(const OsSartOptions&) const { return "os_sart"; }
  std::string operator()(const CglsOptions&) const { return "cgls"; }
  std::string operator()(const StoredArtOptions&) const { return "art"; }
  std::string operator()(const IcdAlgorithmOptions&) const { return "icd"; }
};

class FbpAlgorithm final : public Algorithm {
 public:
  absl::StatusOr<Array3D> Run(const ReconstructionRequest& request, const Array3D& projections,
                              Backend& backend, const RunContext& context) const override {
    TOMO_ASSIGN_OR_RETURN(const FbpOptions* options, OptionsOf(request));
    return FbpForGeometry(request.geometry, request.volume, projections, options->filter,
                          backend, context);
  }
  absl::StatusOr<Array3D> RunOnBackends(const ReconstructionRequest& request,
                                        const Array3D& projections,
                                        const std::vector<Backend*>& backends,
                                        const RunContext& context) const override {
    const VectorGeometry* vectors = SlabbedGeometry(request);
    if (vectors == nullptr) return Algorithm::RunOnBackends(request, projections, backends, context);
    return Fdk(*vectors, request.volume, projections,
               FdkOptions{std::get<FbpOptions>(request.algorithm).filter}, backends, context);
  }
  uint64_t MinimumDeviceBytes(const ReconstructionRequest& request) const override {
    if (const VectorGeometry* vectors = SlabbedGeometry(request)) {
      // Fdk's smallest piece: one z-slice and one view (slab_plan.h's memory model).
      return SlabBytes(*vectors, request.volume, 4, /*slices=*/1, /*views=*/1);
    }
    // 2D parallel and Radon FBP are not split: the volume and the projections.
    const Dims3 image = request.volume.dims();
    const Dims3 sinogram = ProjectionDims(request.geometry);
    return 4 * static_cast<uint64_t>(image.count() + sinogram.count());
  }
  // Fdk's stream; 2D parallel FBP (small sinograms, its own exact-transpose pair) and Radon
  // FBP are not streamed.
  // Fdk's slabs go to one thread per backend.
  bool SplitsOverBackends(const ReconstructionRequest& request) const override {
    return SlabbedGeometry(request) != nullptr;
  }
  bool StreamsViews(const ReconstructionRequest& request) const override {
    return SlabbedGeometry(request) != nullptr;
  }
  absl::StatusOr<std::unique_ptr<ViewStream>> BeginViewStream(
      const ReconstructionRequest& request, Backend& backend,
      const RunContext& context) const override {
    const VectorGeometry* vectors = SlabbedGeometry(request);
    if (vectors == nullptr) return Algorithm::BeginViewStream(request, backend, context);
    TOMO_ASSIGN_OR_RETURN(
        std::unique_ptr<FdkStream> stream,
        BeginFdk(*vectors, request.volume,
                 FdkOptions{std::get<FbpOptions>(request.algorithm).filter}, backend, context));
    return std::unique_ptr<ViewStream>(std::move(stream));
  }

 private:
  static absl::StatusOr<const FbpOptions*> OptionsOf(const ReconstructionRequest& request) {
    const FbpOptions* options = std::get_if<FbpOptions>(&request.algorithm);
    if (options == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("algorithm: fbp was given the options of ",
                                                     AlgorithmName(request.algorithm)));
    }
    return options;
  }
  // The vector geometry that Fdk reconstructs (in z-slabs, streamed, on several devices),
  // or null: fbp's options missing, a Radon geometry, or a 2D parallel beam (Fbp).
  static const VectorGeometry* SlabbedGeometry(const ReconstructionRequest& request) {
    const VectorGeometry* vectors = std::get_if<VectorGeometry>(&request.geometry);
    if (vectors == nullptr || !std::holds_alternative<FbpOptions>(request.algorithm) ||
        ExactParallel2DForm(*vectors, request.volume).has_value()) {
      return nullptr;
    }
    return vectors;
  }
};

}  // namespace

absl::StatusOr<Array3D> Algorithm::RunOnBackends(const ReconstructionRequest& request,
                                                 const Array3D& projections,
                                                 const std::vector<Backend*>& backends,
                                                 const RunContext& context) const {
  return Run(request, projections, *backends.front(), context);
}

absl::StatusOr<std::unique_ptr<ViewStream>> Algorithm::BeginViewStream(
    const ReconstructionRequest& request, Backend& /*backend*/,
    const RunContext& /*context*/) const {
  return absl::UnimplementedError(absl::StrCat(
      "algorithm ", AlgorithmName(request.algorithm),
      " cannot take its views as they arrive for this geometry; it runs once all are there"));
}

uint64_t AlgorithmRegistry::MinimumDeviceBytes(const ReconstructionRequest& request) const {
  const auto found = algorithms_.find(AlgorithmName(request.algorithm));
  return found == algorithms_.end() ? 0 : found->second->MinimumDeviceBytes(request);
}

uint64_t AlgorithmRegistry::MinimumDeviceBytesOn(const ReconstructionRequest& request,
                                                 DeviceKind kind) const {
  const auto found = algorithms_.find(AlgorithmName(request.algorithm));
  return found == algorithms_.end() ? 0 : found->second->MinimumDeviceBytesOn(request, kind);
}

bool AlgorithmRegistry::SplitsOverBackends(const ReconstructionRequest& request) const {
  const auto found = algorithms_.find(AlgorithmName(request.algorithm));
  return found != algorithms_.end() && found->second->SplitsOverBackends(request);
}

bool AlgorithmRegistry::StreamsViews(const ReconstructionRequest& request) const {
  const auto found = algorithms_.find(AlgorithmName(request.algorithm));
  return found != algorithms_.end() && found->second->StreamsViews(request);
}

absl::StatusOr<std::unique_ptr<ViewStream>> AlgorithmRegistry::BeginViewStream(
    const ReconstructionRequest& request, Backend& backend, const RunContext& context) const {
  const auto found = algorithms_.find(AlgorithmName(request.algorithm));
  if (found == algorithms_.end()) return UnknownAlgorithmError(AlgorithmName(request.algorithm));
  return found->second->BeginViewStream(request, backend, context);
}

std::string AlgorithmName(const AlgorithmOptions& options) { return std::visit(NameOf{}, options); }

AlgorithmRegistry AlgorithmRegistry::WithBuiltins() {
  AlgorithmRegistry registry;
  registry.Register("fbp", std::make_unique<FbpAlgorithm>());
  registry.Register("sirt", MakeSirtAlgorithm());
  registry.Register("sart", MakeSartAlgorithm());
  registry.Register("os_sart", MakeOsSartAlgorithm());
  registry.Register("cgls", MakeCglsAlgorithm());
  registry.Register("art", MakeStoredMatrixArtAlgorithm());
  registry.Register("icd", MakeStatisticalIcdAlgorithm());
  return registry;
}

void AlgorithmRegistry::Register(std::string name, std::unique_ptr<Algorithm> algorithm) {
  algorithms_[std::move(name)] = std::move(algorithm);
}

absl::Status AlgorithmRegistry::UnknownAlgorithmError(const std::string& name) const {
  return absl::InvalidArgumentError(absl::StrCat("algorithm: \"", name,
                                                 "\" is not available; known algorithms: [",
                                                 absl::StrJoin(Names(), ", "), "]"));
}

std::vector<std::string> AlgorithmRegistry::Names() const {
  std::vector<std::string> names;
  names.reserve(algorithms_.size());
  for (const auto& [name, algorithm] : algorithms_) names.push_back(name);
  return names;
}

absl::StatusOr<Array3D> AlgorithmRegistry::Run(const ReconstructionRequest& request,
                                               const Array3D& projections, Backend& backend,
                                               const RunContext& context) const {
  const std::string name = AlgorithmName(request.algorithm);
  const auto found = algorithms_.find(name);
  if (found == algorithms_.end()) return UnknownAlgorithmError(name);
  TOMO_RETURN_IF_ERROR(CheckDimsMatch("projections", projections.dims(),
                                      ProjectionDims(request.geometry), "(views, rows, detectors)"));
  return found->second->Run(request, projections, backend, context);
}

absl::StatusOr<Array3D> AlgorithmRegistry::RunOnBackends(const ReconstructionRequest& request,
                                                         const Array3D& projections,
                                                         const std::vector<Backend*>& backends,
                                                         const RunContext& context) const {
  if (backends.empty()) return absl::InvalidArgumentError("backends: none given");
  for (size_t i = 0; i < backends.size(); ++i) {
    if (backends[i] == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("backends[", i, "]: is null"));
    }
  }
  const std::string name = AlgorithmName(request.algorithm);
  const auto found = algorithms_.find(name);
  if (found == algorithms_.end() || backends.size() == 1) {
    return Run(request, projections, *backends.front(), context);
  }
  TOMO_RETURN_IF_ERROR(CheckDimsMatch("projections", projections.dims(),
                                      ProjectionDims(request.geometry), "(views, rows, detectors)"));
  return found->second->RunOnBackends(request, projections, backends, context);
}

}  // namespace tomo::core
