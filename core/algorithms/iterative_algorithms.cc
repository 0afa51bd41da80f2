#include "core/algorithms/iterative_algorithms.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/algorithms/block_iterative.h"
#include "core/algorithms/cgls.h"
#include "core/algorithms/fbp_for_geometry.h"
#include "core/algorithms/filtered_back_projection.h"
#include "core/algorithms/iterative_common.h"
#include "core/algorithms/sirt.h"
#include "core/base/status_macros.h"
#include "core/geometry/parallel_2d_form.h"
#include "core/operators/several_devices_resident_operators.h"

namespace tomo::core {
namespace {

// The options with initial_from_fbp turned into an initial volume: the FBP of a 2D
// parallel geometry, the FDK (FBP for parallel beams) of a vector geometry, Radon FBP of a
// RadonGeometry; Ram-Lak.
absl::StatusOr<IterativeOptions> WithFbpStart(const IterativeOptions& options,
                                              const ReconstructionRequest& request,
                                              const Array3D& projections, Backend& backend,
                                              const RunContext& context) {
  if (!options.initial_from_fbp) return options;
  if (options.initial_volume != nullptr) {
    return absl::InvalidArgumentError(
        "initial_volume: given together with the FBP start (initial_from_fbp); choose one");
  }
  RunContext quiet = context;
  quiet.on_progress = nullptr;  // the iterations report progress; the start is their setup
  TOMO_ASSIGN_OR_RETURN(Array3D start, FbpForGeometry(request.geometry, request.volume,
                                                      projections, FilterOptions{}, backend,
                                                      quiet));
  IterativeOptions result = options;
  result.initial_from_fbp = false;
  result.initial_volume = std::make_shared<const Array3D>(std::move(start));
  return result;
}

// The same start for a run on several backends: FDK shares its z-slabs among them (Fdk's
// several-backends form); the 2D parallel and Radon FBPs (small, not split) run on the first.
absl::StatusOr<IterativeOptions> WithFbpStart(const IterativeOptions& options,
                                              const ReconstructionRequest& request,
                                              const Array3D& projections,
                                              const std::vector<Backend*>& backends,
                                              const RunContext& context) {
  const auto* vectors = std::get_if<VectorGeometry>(&request.geometry);
  if (!options.initial_from_fbp || options.initial_volume != nullptr || vectors == nullptr ||
      ExactParallel2DForm(*vectors, request.volume).has_value()) {
    return WithFbpStart(options, request, projections, *backends.front(), context);
  }
  RunContext quiet = context;
  quiet.on_progress = nullptr;
  TOMO_ASSIGN_OR_RETURN(Array3D start, Fdk(*vectors, request.volume, projections,
                                           FdkOptions{FilterOptions{}}, backends, quiet));
  IterativeOptions result = options;
  result.initial_from_fbp = false;
  result.initial_volume = std::make_shared<const Array3D>(std::move(start));
  return result;
}

// Whether a run of the request on several backends shares the work among them: a
// VectorGeometry does (its views are split, the volume replicated:
// several_devices_resident_operators.h); a RadonGeometry runs on the first backend (its
// CUDA projector goes through host memory on every call, so a second device adds copies,
// not speed).
bool SharedAmongDevices(const ReconstructionRequest& request) {
  return std::holds_alternative<VectorGeometry>(request.geometry);
}

// One registry entry: Options is the alternative of AlgorithmOptions it takes; run(options,
// geometry, ...) the method.
// the method, called with a Backend& (one device) or a ResidentOperators& (the
// SeveralDevicesResidentOperators of several).
template <typename Options, typename Method>
class IterativeAlgorithm final : public Algorithm {
 public:
  IterativeAlgorithm(const char* name, Method method) : name_(name), method_(std::move(method)) {}

  absl::StatusOr<Array3D> Run(const ReconstructionRequest& request, const Array3D& projections,
                              Backend& backend, const RunContext& context) const override {
    TOMO_ASSIGN_OR_RETURN(const Options* options, OptionsOf(request));
    Options started = *options;
    TOMO_ASSIGN_OR_RETURN(started.iterative, WithFbpStart(options->iterative, request,
                                                         projections, backend, context));
    TOMO_ASSIGN_OR_RETURN(IterativeResult result, method_(started, request.geometry, request.volume,
                                                          projections, backend, context));
    return std::move(result.volume);
  }

  // Only the methods with one reduction per iteration gain from more devices: sart and
  // os_sart reduce the volume once per block of views (on two H200s os_sart with 10 blocks
  // ran 1.3x faster, on four 0.75x, i.e. slower than one), so tomod keeps them on one
  // device; RunOnBackends still shares them when a caller gives several backends.
  bool SplitsOverBackends(const ReconstructionRequest& request) const override {
    const std::string name = name_;
    return SharedAmongDevices(request) && (name == "sirt" || name == "cgls");
  }

  // Several backends: one SeveralDevicesResidentOperators over their ResidentOperators, the
  // views split among them; one backend, or a geometry not shared (SharedAmongDevices):
  // Run on the first.
  absl::StatusOr<Array3D> RunOnBackends(const ReconstructionRequest& request,
                                        const Array3D& projections,
                                        const std::vector<Backend*>& backends,
                                        const RunContext& context) const override {
    if (backends.size() < 2 || !SharedAmongDevices(request)) {
      return Run(request, projections, *backends.front(), context);
    }
    TOMO_ASSIGN_OR_RETURN(const Options* options, OptionsOf(request));
    Options started = *options;
    TOMO_ASSIGN_OR_RETURN(started.iterative, WithFbpStart(options->iterative, request,
                                                         projections, backends, context));
    std::vector<std::unique_ptr<ResidentOperators>> devices;
    for (Backend* backend : backends) {
      TOMO_ASSIGN_OR_RETURN(std::unique_ptr<ResidentOperators> device,
                            backend->MakeResidentOperators());
      devices.push_back(std::move(device));
    }
    TOMO_ASSIGN_OR_RETURN(std::unique_ptr<SeveralDevicesResidentOperators> ops,
                          SeveralDevicesResidentOperators::Create(std::move(devices)));
    TOMO_ASSIGN_OR_RETURN(IterativeResult result, method_(started, request.geometry, request.volume,
                                                          projections, *ops, context));
    return std::move(result.volume);
  }

 private:
  absl::StatusOr<const Options*> OptionsOf(const ReconstructionRequest& request) const {
    const Options* options = std::get_if<Options>(&request.algorithm);
    if (options == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("algorithm: ", name_,
                                                     " was given the options of ",
                                                     AlgorithmName(request.algorithm)));
    }
    return options;
  }

  const char* name_;
  Method method_;
};

template <typename Options, typename Method>
std::unique_ptr<Algorithm> Make(const char* name, Method method) {
  return std::make_unique<IterativeAlgorithm<Options, Method>>(name, std::move(method));
}

}  // namespace

std::unique_ptr<Algorithm> MakeSirtAlgorithm() {
  return Make<SirtOptions>("sirt", [](const SirtOptions& o, const Geometry& g,
                                      const VolumeGeometry& v, const Array3D& b, auto& devices,
                                      const RunContext& c) {
    return Sirt(g, v, b, o.iterative, devices, c);
  });
}

std::unique_ptr<Algorithm> MakeSartAlgorithm() {
  return Make<SartOptions>("sart", [](const SartOptions& o, const Geometry& g,
                                      const VolumeGeometry& v, const Array3D& b, auto& devices,
                                      const RunContext& c) {
    return BlockIterative(g, v, b, o.iterative, ProjectionDims(g).d0, o.order, devices, c);
  });
}

std::unique_ptr<Algorithm> MakeOsSartAlgorithm() {
  return Make<OsSartOptions>("os_sart", [](const OsSartOptions& o, const Geometry& g,
                                           const VolumeGeometry& v, const Array3D& b,
                                           auto& devices, const RunContext& c) {
    return BlockIterative(g, v, b, o.iterative, o.blocks, o.order, devices, c);
  });
}

std::unique_ptr<Algorithm> MakeCglsAlgorithm() {
  return Make<CglsOptions>("cgls", [](const CglsOptions& o, const Geometry& g,
                                      const VolumeGeometry& v, const Array3D& b, auto& devices,
                                      const RunContext& c) {
    return Cgls(g, v, b, o.iterative, devices, c);
  });
}

}  // namespace tomo::core
