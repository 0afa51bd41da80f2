// Analytic reconstruction for every geometry of the vector model:
//  - parallel beams (2D and 3D): ramp-filter the rows, back project (kNone), weight each
//    view by its share of the angular range (as Fbp for ParallelGeometry2D);
//  - fan and circular cone beams: FDK (Feldkamp, Davis and Kress): each projection is
//    cosine-weighted (the source-to-pixel cosine), ramp-filtered along rows (filter built
//    for the detector spacing scaled to the rotation axis), optionally Parker-weighted for a
//    short scan, and back projected with the FDK distance weight (kFdk); the result is
//    scaled by the angular step. Flat and cylindrical detectors. Full scans (2 pi) weight
//    each view by 1/2; short scans (range between pi + fan angle and 2 pi) use Parker's
//    weights (smooth, summing to 1 over conjugate rays).
// Helical trajectories are refused (FAILED_PRECONDITION: FDK needs a circular orbit; an
// iterative method or a helical FBP is needed).
//
// Circular orbit assumed: the sources lie on a circle about the z axis in one plane; the
// rotation angle of each view is taken from its source position. INVALID_ARGUMENT when the
// angular range is too short for the fan (naming the range and the minimum).
//
// Progress stages: "weight and filter", "back projection"; cancellation between stages
// and between view blocks of the back projection.
//
// Weights: FDK's cosine weight is one rows x columns map when every view has the same (a
// detector that turns with the source), else one per view; Parker's (or the full scan's
// 1/2), the angular share and the distance scale are one factor per view and column
// (core/operators/filtered_back_projection_weights.h). Both are computed on the host in
// float64 and applied before the filter.
//
// Larger than memory: the back projection follows a SlabPlan (core/algorithms/slab_plan.h)
// for context.memory_budget_bytes (0: no limit): z-slabs, and view chunks when the
// projections alone do not fit, each slab written into its place in the result.
//  - Device backends (Backend::PrefersFilterAndBackProject), when the plan has one view
//    chunk: one FilterAndBackProject call per slab on the raw projections; the device
//    receives only the detector rows the slab projects onto, streams them through its own
//    buffers and weights, filters and back projects there.
//  - Otherwise the weighted projections are filtered once on the host arrays (the first
//    backend's FilterRows) and back projected slab by slab and chunk by chunk.
// On the CPU backend the result equals the unsplit one bit for bit when only slabs are cut
// (the back projection is voxel-wise, voxel positions in float64); view chunks change the
// order of the float sum over views (relative differences of order 1e-7). The CUDA back
// projection computes voxel positions in float32 from the slab's own geometry: differences
// up to about 1e-3 of the peak between split and unsplit runs (texture weights; measured on
// the H100, 64^3 Shepp-Logan). RESOURCE_EXHAUSTED, before any work, when not even one slice
// and one view fit the budget.
//
// Several backends (devices): the slabs (at least one per backend) are handed out to one
// host thread per backend; each backend is used by that thread only, and the result is the
// same as with one backend. The context's callbacks are then called from those threads.
//
//   TOMO_ASSIGN_OR_RETURN(Array3D volume, Fdk(geometry, volume_geometry, projections,
//                                             {FilterOptions{}}, backend, context));
#pragma once

#include <future>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "core/algorithms/view_stream.h"
#include "core/base/run_context.h"
#include "core/data/array3d.h"
#include "core/filters/ramp_filter.h"
#include "core/geometry/vector_geometry.h"
#include "core/geometry/volume_geometry.h"
#include "core/operators/backend.h"

namespace tomo::core {

struct FdkOptions {
  FilterOptions filter;
};

absl::StatusOr<Array3D> Fdk(const VectorGeometry& geometry, const VolumeGeometry& volume,
                            const Array3D& projections, const FdkOptions& options,
                            Backend& backend, const RunContext& context);

// The same on several backends (at least one, none null; INVALID_ARGUMENT otherwise).
absl::StatusOr<Array3D> Fdk(const VectorGeometry& geometry, const VolumeGeometry& volume,
                            const Array3D& projections, const FdkOptions& options,
                            const std::vector<Backend*>& backends, const RunContext& context);

// Fdk fed with views in order as they arrive (while a job's projections are uploaded): the
// same weights and filter, and one Backend::BeginFilterAndBackProject over the whole volume,
// so a device weights, filters and back projects each chunk as it comes. The result equals
// Fdk's (bit for bit on the CPU; on CUDA up to the float summation order when views are added
// in other pieces than Fdk's chunks).
//
// The volume is allocated when the stream begins and its pages are faulted in on a thread
// of its own while the views arrive, not by its download after the last view (on the H100
// machine, Finish of a 0.54 GB volume: 0.033-0.050 s into fresh pages, 0.026-0.031 s into
// pages faulted in early).
class FdkStream final : public ViewStream {
 public:
  FdkStream(std::unique_ptr<FilterAndBackProjectStream> stream, Dims3 volume_dims);
  ~FdkStream() override;
  FdkStream(const FdkStream&) = delete;
  FdkStream& operator=(const FdkStream&) = delete;
  // As FilterAndBackProjectStream::AddViews.
  absl::Status AddViews(int64_t first_view, const float* views, int64_t count) override {
    return stream_->AddViews(first_view, views, count);
  }
  int64_t views_added() const override { return stream_->views_added(); }
  // After the last view: the volume. FAILED_PRECONDITION when views are missing; once only
  // (FAILED_PRECONDITION after that).
  absl::StatusOr<Array3D> Finish() override;

 private:
  std::unique_ptr<FilterAndBackProjectStream> stream_;
  Array3D volume_;
  std::future<void> volume_touched_;
  bool finished_ = false;
};

// FAILED_PRECONDITION when the reconstruction does not fit in one piece (Fdk's slab plan for
// context.memory_budget_bytes has more than one slab or view chunk: the caller then runs Fdk
// once every view is there); Fdk's errors for the geometry (helical, too short a scan).
absl::StatusOr<std::unique_ptr<FdkStream>> BeginFdk(const VectorGeometry& geometry,
                                                    const VolumeGeometry& volume,
                                                    const FdkOptions& options, Backend& backend,
                                                    const RunContext& context);

}  // namespace tomo::core
