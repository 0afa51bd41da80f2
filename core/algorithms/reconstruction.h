// Reconstruction requests and the registry of algorithms that run them.
//
// A ReconstructionRequest is the core's view of a job: a validated geometry of one of the
// kinds (core/geometry/geometry.h), the volume to produce and the typed options of one
// algorithm. "fbp" on a vector geometry runs Fdk (core/algorithms/filtered_back_projection.h: FBP for parallel
// beams, fan-weighted FBP or FDK for fan and cone beams), or Fbp with Joseph's
// exact-transpose pair on a 2D parallel beam (ExactParallel2DForm); on a Radon geometry it
// runs RadonFbp. An algorithm given a kind it cannot take returns INVALID_ARGUMENT naming
// itself and the kind. The AlgorithmRegistry is an object
// filled at start-up (no singleton); tomod and `tomo local` each make one and list its
// names in GetServerInfo.
//
//   AlgorithmRegistry registry = AlgorithmRegistry::WithBuiltins();
//   TOMO_ASSIGN_OR_RETURN(Array3D volume, registry.Run(request, projections, backend, ctx));
#pragma once

#include <map>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "absl/status/statusor.h"
#include "core/algorithms/parallel_2d_fbp.h"
#include "core/algorithms/filtered_back_projection.h"
#include "core/algorithms/iterative_options.h"
#include "core/algorithms/icd_algorithm_options.h"
#include "core/algorithms/stored_art_options.h"
#include "core/base/run_context.h"
#include "core/data/array3d.h"
#include "core/devices/devices.h"
#include "core/geometry/geometry.h"
#include "core/geometry/volume_geometry.h"
#include "core/operators/backend.h"

namespace tomo::core {

using AlgorithmOptions = std::variant<FbpOptions, SirtOptions, SartOptions, OsSartOptions,
                                      CglsOptions, StoredArtOptions, IcdAlgorithmOptions>;
struct ReconstructionRequest {
  Geometry geometry;
  VolumeGeometry volume;
  AlgorithmOptions algorithm;
};

// The registry name of the algorithm the options select ("fbp", ...).
std::string AlgorithmName(const AlgorithmOptions& options);

class Algorithm {
 public:
  virtual ~Algorithm() = default;
  // INVALID_ARGUMENT when the options are not this algorithm's; else as the method.
  virtual absl::StatusOr<Array3D> Run(const ReconstructionRequest& request,
                                      const Array3D& projections, Backend& backend,
                                      const RunContext& context) const = 0;
  // The same on several backends (devices; at least one, none null). The default runs on
  // the first; an algorithm that can share its work among devices overrides it (fbp on a
  // VectorGeometry: Fdk hands z-slabs to one thread per backend).
  virtual absl::StatusOr<Array3D> RunOnBackends(const ReconstructionRequest& request,
                                                const Array3D& projections,
                                                const std::vector<Backend*>& backends,
                                                const RunContext& context) const;
  // The least device memory a run of the request can be made to fit (by slabs, view chunks
  // or whatever the method can split), in bytes; tomod refuses up front a job whose
  // minimum exceeds every device's budget. 0: not known (the run then finds out).
  virtual uint64_t MinimumDeviceBytes(const ReconstructionRequest& /*request*/) const {
    return 0;
  }
  // MinimumDeviceBytes on a device of this kind, for a method whose need differs by kind
  // (art's tiled kernels take their own layout of the matrix on a CUDA device); by default
  // the same on every kind.
  virtual uint64_t MinimumDeviceBytesOn(const ReconstructionRequest& request,
                                        DeviceKind /*kind*/) const {
    return MinimumDeviceBytes(request);
  }
  // Whether RunOnBackends shares this request's work among several backends (false: it runs
  // on the first alone); tomod gives several devices only to jobs that use them.
  virtual bool SplitsOverBackends(const ReconstructionRequest& /*request*/) const {
    return false;
  }
  // Whether BeginViewStream can take this request's views as they arrive (tomod then
  // reconstructs while the upload runs). false by default.
  virtual bool StreamsViews(const ReconstructionRequest& /*request*/) const { return false; }
  // The run fed with views in order (view_stream.h); its volume equals Run's. UNIMPLEMENTED
  // unless StreamsViews; BeginFdk's errors (FAILED_PRECONDITION when the run would need
  // z-slabs or view chunks for context.memory_budget_bytes).
  virtual absl::StatusOr<std::unique_ptr<ViewStream>> BeginViewStream(
      const ReconstructionRequest& request, Backend& backend, const RunContext& context) const;
};

class AlgorithmRegistry {
 public:
  static AlgorithmRegistry WithBuiltins();

  void Register(std::string name, std::unique_ptr<Algorithm> algorithm);
  std::vector<std::string> Names() const;
  // INVALID_ARGUMENT naming the known algorithms when none is registered under the name of
  // request.algorithm; INVALID_ARGUMENT when projections do not match the geometry.
  absl::StatusOr<Array3D> Run(const ReconstructionRequest& request, const Array3D& projections,
                              Backend& backend, const RunContext& context) const;
  // As Run, on several backends (Algorithm::RunOnBackends); INVALID_ARGUMENT when backends
  // is empty or holds a null.
  absl::StatusOr<Array3D> RunOnBackends(const ReconstructionRequest& request,
                                        const Array3D& projections,
                                        const std::vector<Backend*>& backends,
                                        const RunContext& context) const;
  // Algorithm::MinimumDeviceBytes of the request's algorithm; 0 when none is registered.
  uint64_t MinimumDeviceBytes(const ReconstructionRequest& request) const;
  // Algorithm::MinimumDeviceBytesOn of the request's algorithm; 0 when none is registered.
  uint64_t MinimumDeviceBytesOn(const ReconstructionRequest& request, DeviceKind kind) const;
  // Algorithm::SplitsOverBackends of the request's algorithm; false when none is registered.
  bool SplitsOverBackends(const ReconstructionRequest& request) const;
  // Algorithm::StreamsViews / BeginViewStream of the request's algorithm (false /
  // INVALID_ARGUMENT naming the known algorithms when none is registered).
  bool StreamsViews(const ReconstructionRequest& request) const;
  absl::StatusOr<std::unique_ptr<ViewStream>> BeginViewStream(const ReconstructionRequest& request,
                                                             Backend& backend,
                                                             const RunContext& context) const;

 private:
  // INVALID_ARGUMENT naming name and the registered algorithms.
  absl::Status UnknownAlgorithmError(const std::string& name) const;

  std::map<std::string, std::unique_ptr<Algorithm>> algorithms_;
};

}  // namespace tomo::core
