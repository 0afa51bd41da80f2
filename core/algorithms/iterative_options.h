// The options and the result the iterative methods share (SIRT, SART, the block-iterative
// OS-SART and CGLS: sirt.h, block_iterative.h, cgls.h), mapped one-to-one from
// tomoserve.v1.IterativeOptions by runner/job_spec.cc, and their validation.
//
// Every method solves A x = b in the least-squares sense for the volume x, starting from
// initial_volume (zeros when none), for `iterations` iterations or until the relative
// residual ||b - A x|| / ||b|| measured during an iteration is at most
// stop_relative_residual. The SIRT family projects x onto the box [lower_bound,
// upper_bound] after every update (non-negativity: lower_bound = 0) and relaxes its steps
// by `relaxation` (lambda, in (0, 2)); CGLS has neither (unconstrained, no step size), and
// its options must leave them at their defaults.
//
//   IterativeOptions options;
//   options.iterations = 50;
//   options.lower_bound = 0;  // non-negativity
//   TOMO_ASSIGN_OR_RETURN(IterativeResult result,
//                         Sirt(geometry, volume, projections, options, backend, context));
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "core/data/array3d.h"
#include "core/operators/projector_model.h"
#include "core/geometry/volume_geometry.h"

namespace tomo::core {

// What an observer of the iterations sees (IterativeOptions::on_iteration).
struct IterationReport {
  int64_t iteration = 0;           // 1-based
  double relative_residual = 0;    // as measured during this iteration (see the methods)
  const Array3D* volume = nullptr;  // x after this iteration, when the observer asked for it
};

struct IterativeOptions {
  // The core's own bound; servers set a lower one (tomod --max_iterations).
  static constexpr int64_t kMaxIterations = 1000000;

  int64_t iterations = 0;  // [1, kMaxIterations]
  double relaxation = 1;   // lambda, (0, 2); SIRT family only
  // Box constraint, applied after every update; infinite means none.
  double lower_bound = -std::numeric_limits<double>::infinity();
  double upper_bound = std::numeric_limits<double>::infinity();
  // Stop after the iteration whose measured relative residual is at most this; 0: never.
  double stop_relative_residual = 0;
  // The start, (nz, ny, nx) as the volume (e.g. an FBP/FDK result of the same data); null
  // means zeros.
  std::shared_ptr<const Array3D> initial_volume;
  // Start from the FBP/FDK result of the same projections instead (registry entries only,
  // iterative_algorithms.h: fbp on a 2D parallel geometry, FDK with the Ram-Lak filter
  // otherwise); not together with initial_volume.
  bool initial_from_fbp = false;
  // The projector pair (projector_model.h): kJoseph (Joseph forward, its matched
  // voxel-driven transpose) for vector geometries, kJosephExactTranspose2D for the exact
  // adjoint on 2D parallel beams, kRadonPlaneIntegral for Radon geometries.
  ProjectorModel projector = ProjectorModel::kJoseph;

  // For tests and experiments: called after every iteration (the run fails with its
  // status when it returns one). With observe_volume the current volume is downloaded for
  // it every iteration (a full device-to-host copy: slow, not for production).
  std::function<absl::Status(const IterationReport&)> on_iteration;
  bool observe_volume = false;
};

// The order in which the views are dealt into blocks: kSequential gives block k the
// consecutive views [start_k, start_k + size_k); kInterleaved gives it views k, k + B,
// k + 2B, ... (B blocks), so that each block spans the whole angular range; kGoldenRatio
// and kRandom put the views in a sequence (the golden-angle walk over the view indices; a
// shuffle with a fixed seed) and cut it into B consecutive runs (iterative_common.h).
enum class ViewOrder { kSequential, kInterleaved, kGoldenRatio, kRandom };
// The defaults (a JobSpec's VIEW_ORDER_UNSPECIFIED), chosen from `iterative-study
// --order-study` (docs/iterative.md): for SART the golden-ratio order was best or within
// 0.001 RMSE of the best at every lambda <= 1, view count and noise level measured, and
// clearly best at lambda >= 1 in the first sweep; for OS-SART the order mattered little
// and sequential blocks were best at the default lambda 1.
constexpr ViewOrder kDefaultSartViewOrder = ViewOrder::kGoldenRatio;
constexpr ViewOrder kDefaultOsSartViewOrder = ViewOrder::kSequential;

struct SirtOptions {
  IterativeOptions iterative;
};
// SART: one block per view, the blocks visited in `order` (block_iterative.h).
struct SartOptions {
  IterativeOptions iterative;
  ViewOrder order = kDefaultSartViewOrder;
};
// The general block-iterative method (OS-SART): `blocks` in [1, views].
struct OsSartOptions {
  IterativeOptions iterative;
  int64_t blocks = 1;
  ViewOrder order = kDefaultOsSartViewOrder;
};
struct CglsOptions {
  IterativeOptions iterative;
};

struct IterativeResult {
  Array3D volume;
  // One value per iteration run (IterationReport::relative_residual).
  std::vector<double> relative_residuals;
  bool stopped_by_residual = false;
};

// INVALID_ARGUMENT naming the field (as tomoserve.v1.IterativeOptions: "iterations",
// "relaxation", "lower_bound", "upper_bound", "stop_relative_residual",
// "initial_volume"), its value and the allowed range: iterations outside
// [1, kMaxIterations]; relaxation not in (0, 2); a NaN bound or lower_bound > upper_bound;
// stop_relative_residual not in [0, 1); an initial volume whose dims are not the volume's,
// or one given together with initial_from_fbp.
// constrained_method = false (CGLS): relaxation other than 1 or a finite bound is refused
// too.
absl::Status ValidateIterativeOptions(const IterativeOptions& options,
                                      const VolumeGeometry& volume, bool constrained_method);

}  // namespace tomo::core
