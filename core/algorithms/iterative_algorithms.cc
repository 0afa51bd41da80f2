#include "core/algorithms/iterative_algorithms.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "core/algorithms/block_iterative.h"
#include "core/algorithms/cgls.h"
#include "core/algorithms/fbp_for_geometry.h"
#include "core/algorithms/iterative_common.h"
#include "core/algorithms/sirt.h"
#include "core/base/status_macros.h"

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

// One registry entry: Options is the alternative of AlgorithmOptions it takes; run(options,
// geometry, ...) the method.
template <typename Options, typename Method>
class IterativeAlgorithm final : public Algorithm {
 public:
  IterativeAlgorithm(const char* name, Method method) : name_(name), method_(std::move(method)) {}

  absl::StatusOr<Array3D> Run(const ReconstructionRequest& request, const Array3D& projections,
                              Backend& backend, const RunContext& context) const override {
    const Options* options = std::get_if<Options>(&request.algorithm);
    if (options == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("algorithm: ", name_,
                                                     " was given the options of ",
                                                     AlgorithmName(request.algorithm)));
    }
    Options started = *options;
    TOMO_ASSIGN_OR_RETURN(started.iterative, WithFbpStart(options->iterative, request,
                                                         projections, backend, context));
    TOMO_ASSIGN_OR_RETURN(IterativeResult result, method_(started, request.geometry, request.volume,
                                                          projections, backend, context));
    return std::move(result.volume);
  }

 private:
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
                                      const VolumeGeometry& v, const Array3D& b, Backend& backend,
                                      const RunContext& c) {
    return Sirt(g, v, b, o.iterative, backend, c);
  });
}

std::unique_ptr<Algorithm> MakeSartAlgorithm() {
  return Make<SartOptions>("sart", [](const SartOptions& o, const Geometry& g,
                                      const VolumeGeometry& v, const Array3D& b, Backend& backend,
                                      const RunContext& c) {
    return BlockIterative(g, v, b, o.iterative, ProjectionDims(g).d0, o.order, backend, c);
  });
}

std::unique_ptr<Algorithm> MakeOsSartAlgorithm() {
  return Make<OsSartOptions>("os_sart", [](const OsSartOptions& o, const Geometry& g,
                                           const VolumeGeometry& v, const Array3D& b,
                                           Backend& backend, const RunContext& c) {
    return BlockIterative(g, v, b, o.iterative, o.blocks, o.order, backend, c);
  });
}

std::unique_ptr<Algorithm> MakeCglsAlgorithm() {
  return Make<CglsOptions>("cgls", [](const CglsOptions& o, const Geometry& g,
                                      const VolumeGeometry& v, const Array3D& b, Backend& backend,
                                      const RunContext& c) {
    return Cgls(g, v, b, o.iterative, backend, c);
  });
}

}  // namespace tomo::core
