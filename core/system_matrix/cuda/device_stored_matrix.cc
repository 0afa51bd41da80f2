#include "core/system_matrix/cuda/device_stored_matrix.h"

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "core/operators/cuda/cuda_check.h"
#include "core/operators/cuda/cuda_resources.h"
#include "core/system_matrix/cuda/stored_matrix_kernels.h"
#include "core/system_matrix/cuda/symmetric_launch_params.h"
#include "core/system_matrix/cuda/tiled_sweep_owners.h"
#include "core/system_matrix/dense_slabs.h"
#include "core/system_matrix/interleaved_runs.h"
#include "core/system_matrix/segmented_runs.h"
#include "core/system_matrix/square_symmetry.h"
#include "core/system_matrix/tiled_runs.h"
#include "core/system_matrix/view_blocks.h"

namespace tomo::core::system_matrix {
namespace {

using core::cuda::DeviceBuffer;
using core::cuda::ScopedDevice;
using core::cuda::Stream;
using cuda::CheckViews;

template <typename T, typename Allocator>
absl::StatusOr<DeviceBuffer<T>> Upload(const std::vector<T, Allocator>& host,
                                       cudaStream_t stream) {
  TOMO_ASSIGN_OR_RETURN(DeviceBuffer<T> buffer, DeviceBuffer<T>::Allocate(host.size(), stream));
  if (!host.empty()) {
    TOMO_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(buffer.get(), host.data(), host.size() * sizeof(T),
                                              cudaMemcpyHostToDevice, stream));
  }
  return buffer;
}

absl::Status CheckProjections(const Array3D& projections, int64_t views, int64_t columns) {
  const Dims3 expected{views, 1, columns};
  if (projections.dims() != expected) {
    return absl::InvalidArgumentError(absl::StrCat(
        "projections: dims (", projections.dims().d0, ", ", projections.dims().d1, ", ",
        projections.dims().d2, ") must be (", views, ", 1, ", columns, ")"));
  }
  return absl::OkStatus();
}

std::vector<int64_t> AllViews(int64_t count) {
  std::vector<int64_t> views(static_cast<size_t>(count));
  for (int64_t v = 0; v < count; ++v) views[static_cast<size_t>(v)] = v;
  return views;
}

// The state of one ART run on the device, shared by both formats.
struct ArtBuffers {
  DeviceBuffer<float> b, x, residual, z;
  DeviceBuffer<double> sums;
  std::vector<double> host_sums;
  double b_norm2 = 0;
};

absl::StatusOr<ArtBuffers> StartArt(const Array3D& projections, int64_t pixels,
                                    cudaStream_t stream) {
  ArtBuffers run;
  const size_t count = static_cast<size_t>(projections.size());
  TOMO_ASSIGN_OR_RETURN(run.b, DeviceBuffer<float>::Allocate(count, stream));
  TOMO_ASSIGN_OR_RETURN(run.residual, DeviceBuffer<float>::Allocate(count, stream));
  TOMO_ASSIGN_OR_RETURN(run.z, DeviceBuffer<float>::Allocate(count, stream));
  TOMO_ASSIGN_OR_RETURN(run.x, DeviceBuffer<float>::Allocate(static_cast<size_t>(pixels), stream));
  run.host_sums.resize(static_cast<size_t>(cuda::SumSquaresBlocks(projections.size())));
  TOMO_ASSIGN_OR_RETURN(run.sums, DeviceBuffer<double>::Allocate(run.host_sums.size(), stream));
  TOMO_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(run.b.get(), projections.data(), count * sizeof(float),
                                            cudaMemcpyHostToDevice, stream));
  TOMO_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(run.x.get(), 0, static_cast<size_t>(pixels) * sizeof(float), stream));
  TOMO_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(run.residual.get(), 0, count * sizeof(float), stream));
  for (int64_t i = 0; i < projections.size(); ++i) {
    run.b_norm2 += static_cast<double>(projections.data()[i]) * projections.data()[i];
  }
  return run;
}

// After a sweep: the relative residual, progress, and whether to stop.
absl::StatusOr<bool> FinishSweep(ArtBuffers& run, int64_t it, const ArtOptions& options,
                                 const RunContext& context, ArtResult& result, cudaStream_t stream) {
  TOMO_CUDA_RETURN_IF_ERROR(cuda::LaunchSumSquares(run.residual.get(),
                                                   static_cast<int64_t>(run.residual.size()),
                                                   run.sums.get(), stream));
  TOMO_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(run.host_sums.data(), run.sums.get(),
                                            run.host_sums.size() * sizeof(double),
                                            cudaMemcpyDeviceToHost, stream));
  TOMO_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  double residual2 = 0;
  for (const double s : run.host_sums) residual2 += s;
  return FinishArtSweep(it, residual2, run.b_norm2, options, context, result);
}

absl::Status DownloadImage(ArtBuffers& run, ArtResult& result, cudaStream_t stream) {
  TOMO_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(result.image.data(), run.x.get(),
                                            result.image.size_bytes(), cudaMemcpyDeviceToHost,
                                            stream));
  TOMO_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  return absl::OkStatus();
}

// One sweep's launches (three per block: 270 for 720 views in orbits) recorded once as a CUDA
// graph and replayed every iteration, which saves their launch cost. The kernels' arguments
// do not change between sweeps (the same buffers), so the replay is the same work.
class SweepGraph {
 public:
  SweepGraph() = default;
  SweepGraph(const SweepGraph&) = delete;
  SweepGraph& operator=(const SweepGraph&) = delete;
  ~SweepGraph() {
    if (exec_ != nullptr) cudaGraphExecDestroy(exec_);
    if (graph_ != nullptr) cudaGraphDestroy(graph_);
  }
  // Records what enqueue puts on the stream (nothing runs).
  template <typename Enqueue>
  absl::Status Record(cudaStream_t stream, Enqueue enqueue) {
    TOMO_CUDA_RETURN_IF_ERROR(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    const absl::Status enqueued = enqueue();
    const cudaError_t ended = cudaStreamEndCapture(stream, &graph_);
    TOMO_RETURN_IF_ERROR(enqueued);
    TOMO_CUDA_RETURN_IF_ERROR(ended);
    TOMO_CUDA_RETURN_IF_ERROR(cudaGraphInstantiate(&exec_, graph_, 0));
    return absl::OkStatus();
  }
  absl::Status Launch(cudaStream_t stream) {
    TOMO_CUDA_RETURN_IF_ERROR(cudaGraphLaunch(exec_, stream));
    return absl::OkStatus();
  }

 private:
  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
};

// The sweeps of an ART run: enqueue_sweep() enqueues one sweep's launches on s, recorded once
// as a CUDA graph and replayed (launched call by call where recording fails: the same work,
// more launch time); after each, the residual, progress and the stopping rule
// (FinishSweep); the image downloaded at the end (and after every sweep for on_sweep).
template <typename EnqueueSweep>
absl::StatusOr<ArtResult> RunSweeps(ArtBuffers& run, const ArtOptions& options,
                                    const RunContext& context, EnqueueSweep& enqueue_sweep,
                                    cudaStream_t s, ArtResult& result) {
  SweepGraph sweep;
  const bool recorded = sweep.Record(s, enqueue_sweep).ok();
  if (!recorded) cudaGetLastError();
  for (int64_t it = 1; it <= options.iterations; ++it) {
    TOMO_RETURN_IF_ERROR(context.CheckCancelled(absl::StrCat("art / iteration ", it)));
    TOMO_RETURN_IF_ERROR(recorded ? sweep.Launch(s) : enqueue_sweep());
    TOMO_ASSIGN_OR_RETURN(const bool stop, FinishSweep(run, it, options, context, result, s));
    if (options.on_sweep) {
      TOMO_RETURN_IF_ERROR(DownloadImage(run, result, s));
      TOMO_RETURN_IF_ERROR(options.on_sweep(it, result.image));
    }
    if (stop) break;
  }
  TOMO_RETURN_IF_ERROR(DownloadImage(run, result, s));
  return std::move(result);
}

class DeviceSymmetricMatrix final : public DeviceStoredMatrix {
 public:
  static absl::StatusOr<std::unique_ptr<DeviceSymmetricMatrix>> Create(
      const SymmetricSystemMatrix& a, int device, SymmetricKernels kernels, int slab_steps,
      int most_slot_buffers, bool allow_resident_x) {
    TOMO_ASSIGN_OR_RETURN(ScopedDevice scoped, ScopedDevice::Enter(device));
    auto m = std::unique_ptr<DeviceSymmetricMatrix>(new DeviceSymmetricMatrix(a, device));
    m->kernels_ = kernels;
    m->maps_ = cuda::SquareMaps();
    TOMO_ASSIGN_OR_RETURN(m->stream_, Stream::Create());
    const cudaStream_t s = m->stream_.get();
    TOMO_ASSIGN_OR_RETURN(m->row_norm2_, Upload(a.row_norms2(), s));
    const int32_t n = static_cast<int32_t>(a.scan().nx());
    const int32_t columns = static_cast<int32_t>(a.scan().columns());
    int partial_segments = 1;
    if (m->UsesRuns()) {
      const std::vector<uint2> runs = cuda::PackRuns(a);
      TOMO_ASSIGN_OR_RETURN(m->row_value_begin_, Upload(a.row_value_begin(), s));
      TOMO_ASSIGN_OR_RETURN(m->row_run_begin_, Upload(a.row_run_begin(), s));
      TOMO_ASSIGN_OR_RETURN(m->row_iy_first_, Upload(a.row_iy_first(), s));
      TOMO_ASSIGN_OR_RETURN(m->runs_, Upload(runs, s));
      TOMO_ASSIGN_OR_RETURN(m->values_, Upload(a.values(), s));
      TOMO_ASSIGN_OR_RETURN(const std::vector<uint4> headers, cuda::PackRowHeaders(a));
      TOMO_ASSIGN_OR_RETURN(m->row_headers_, Upload(headers, s));
      // Synchronise before the host arrays go.
      TOMO_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(s));
      m->segments_ = cuda::SymmetricForwardSegments(n, columns);
      partial_segments = m->segments_;
    }
    if (m->UsesDense()) {
      TOMO_ASSIGN_OR_RETURN(const DenseSlabs dense, DenseSlabs::Build(a, DenseSlabs::SegmentsFor(a, slab_steps)));
      TOMO_ASSIGN_OR_RETURN(m->dense_values_, Upload(dense.values(), s));
      TOMO_ASSIGN_OR_RETURN(m->dense_offsets_, Upload(dense.pixel_offsets(), s));
      TOMO_ASSIGN_OR_RETURN(m->dense_slabs_, Upload(dense.slabs(), s));
      TOMO_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(s));
      for (int64_t b = 0; b <= a.num_blocks(); ++b) m->dense_view_begin_.push_back(dense.view_begin(b));
      m->dense_ = {m->dense_values_.get(), m->dense_offsets_.get(), m->dense_slabs_.get(), n, columns,
                   dense.segments()};
      partial_segments = std::max(partial_segments, dense.segments());
    }
    if (m->UsesTransposedImage()) {
      TOMO_ASSIGN_OR_RETURN(m->x_transposed_, DeviceBuffer<float>::Allocate(m->pixels(), s));
    }
    TOMO_ASSIGN_OR_RETURN(m->partials_, DeviceBuffer<float>::Allocate(
        static_cast<size_t>(partial_segments) * 8 * static_cast<size_t>(columns), s));
    m->arrays_ = {m->row_value_begin_.get(), m->row_run_begin_.get(), m->row_iy_first_.get(),
                  m->runs_.get(), m->values_.get(), m->row_norm2_.get(), m->row_headers_.get(),
                  n, columns};
    if (m->UsesSegmented()) {
      TOMO_ASSIGN_OR_RETURN(const SegmentedRuns segmented,
                            SegmentedRuns::Build(a, SegmentedRuns::SegmentsFor(a, slab_steps)));
      TOMO_ASSIGN_OR_RETURN(m->segmented_values_, Upload(segmented.values(), s));
      TOMO_ASSIGN_OR_RETURN(m->segmented_runs_, Upload(segmented.runs(), s));
      TOMO_ASSIGN_OR_RETURN(m->segmented_slabs_, Upload(segmented.slabs(), s));
      TOMO_ASSIGN_OR_RETURN(m->segmented_table_, Upload(segmented.segment_of_column(), s));
      TOMO_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(s));
      m->segmented_ = {m->segmented_values_.get(), m->segmented_runs_.get(),
                       m->segmented_slabs_.get(), m->segmented_table_.get(), n, columns,
                       segmented.segments(), segmented.groups_per_view()};
      TOMO_ASSIGN_OR_RETURN(m->partials_, DeviceBuffer<float>::Allocate(
          static_cast<size_t>(std::max(partial_segments, segmented.segments())) * 8 *
              static_cast<size_t>(columns), s));
    }
    if (m->UsesInterleaved()) {
      TOMO_ASSIGN_OR_RETURN(const InterleavedRuns blocked,
                            InterleavedRuns::Build(a, InterleavedRuns::SegmentsFor(a, slab_steps)));
      TOMO_ASSIGN_OR_RETURN(m->blocked_values_, Upload(blocked.values(), s));
      TOMO_ASSIGN_OR_RETURN(m->blocked_runs_, Upload(blocked.runs(), s));
      TOMO_ASSIGN_OR_RETURN(m->blocked_headers_, Upload(blocked.row_headers(), s));
      TOMO_ASSIGN_OR_RETURN(m->blocked_slabs_, Upload(blocked.slabs(), s));
      TOMO_ASSIGN_OR_RETURN(m->blocked_cursors_, Upload(blocked.cursors(), s));
      TOMO_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(s));
      for (int64_t b = 0; b <= a.num_blocks(); ++b) {
        m->blocked_view_begin_.push_back(blocked.view_begin(b));
      }
      const uint2* runs = reinterpret_cast<const uint2*>(m->blocked_runs_.get());
      const uint4* headers = reinterpret_cast<const uint4*>(m->blocked_headers_.get());
      m->blocked_ = {m->blocked_values_.get(), runs, headers, m->blocked_slabs_.get(),
                     m->blocked_cursors_.get(), n, columns, blocked.segments()};
      // The orbit transpose reads the same arrays, 32 slots apart.
      m->arrays_ = {nullptr, nullptr, nullptr, runs, m->blocked_values_.get(), m->row_norm2_.get(),
                    headers, n, columns, InterleavedRuns::kLanes};
      TOMO_ASSIGN_OR_RETURN(m->partials_, DeviceBuffer<float>::Allocate(
          static_cast<size_t>(std::max(partial_segments, blocked.segments())) * 8 *
              static_cast<size_t>(columns), s));
    }
    if (m->UsesTiled()) {
      // Built at the matrix's first upload for this side, shared by the later ones.
      TOMO_ASSIGN_OR_RETURN(
          const std::shared_ptr<const TiledRuns> layout,
          a.TiledLayout(slab_steps));
      const TiledRuns& tiled = *layout;
      TOMO_ASSIGN_OR_RETURN(m->tiled_local_, Upload(tiled.local(), s));
      TOMO_ASSIGN_OR_RETURN(m->tiled_weights_, Upload(tiled.weights(), s));
      TOMO_ASSIGN_OR_RETURN(m->tiled_lane_rays_, Upload(tiled.lane_rays(), s));
      TOMO_ASSIGN_OR_RETURN(m->tiled_lane_switch_, Upload(tiled.lane_switch(), s));
      TOMO_ASSIGN_OR_RETURN(m->tiled_warps_, Upload(tiled.warps(), s));
      TOMO_ASSIGN_OR_RETURN(m->tiled_orbit_warp_begin_, Upload(tiled.orbit_warp_begin(), s));
      TOMO_ASSIGN_OR_RETURN(m->tiled_orbits_, Upload(tiled.orbits(), s));
      TOMO_ASSIGN_OR_RETURN(m->tiled_column_bound_, Upload(tiled.column_bound(), s));
      const TiledTasks& tasks = tiled.tasks();
      TOMO_ASSIGN_OR_RETURN(m->tiled_tasks_, Upload(tasks.tasks(), s));
      TOMO_ASSIGN_OR_RETURN(m->tiled_orbit_task_begin_, Upload(tasks.orbit_task_begin(), s));
      TOMO_ASSIGN_OR_RETURN(m->tiled_transpose_order_, Upload(tasks.transpose_order(), s));
      for (int64_t v = 0; v < a.num_blocks(); ++v) {
        m->tiled_forward_parts_.push_back(tasks.forward_parts(v));
      }
      for (int64_t v = 0; v < a.num_blocks(); ++v) {  // the largest stored view's slots
        const int64_t orbits = tiled.orbits_per_view();
        const int64_t first = tiled.orbit_warp_begin()[static_cast<size_t>(v * orbits)];
        const int64_t end = tiled.orbit_warp_begin()[static_cast<size_t>((v + 1) * orbits)];
        if (first == end) continue;
        const int64_t slots = SlotSpan(tiled.warps()[static_cast<size_t>(first)],
                                       tiled.warps()[static_cast<size_t>(end - 1)]);
        m->tiled_view_bytes_ =
            std::max<uint64_t>(m->tiled_view_bytes_, static_cast<uint64_t>(6 * slots));
      }
      TOMO_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(s));
      m->tiled_ = {m->tiled_local_.get(), m->tiled_weights_.get(), m->tiled_lane_rays_.get(),
                   m->tiled_lane_switch_.get(), m->tiled_warps_.get(),
                   m->tiled_orbit_warp_begin_.get(), m->tiled_orbits_.get(),
                   m->row_norm2_.get(), m->tiled_column_bound_.get(), m->tiled_tasks_.get(),
                   m->tiled_orbit_task_begin_.get(), m->tiled_transpose_order_.get(), n, columns,
                   static_cast<int32_t>(tiled.orbits_per_view()), tiled.tile_side(),
                   tiled.stride()};
      cuda::ComposeTable compose;
      for (int a_map = 0; a_map < 8; ++a_map) {
        for (int b_map = 0; b_map < 8; ++b_map) {
          compose.h[a_map][b_map] = static_cast<int8_t>(ComposeSquareMaps(a_map, b_map));
        }
      }
      TOMO_CUDA_RETURN_IF_ERROR(cuda::PrepareTiledKernels(m->tiled_, m->maps_, compose));
      TOMO_CUDA_RETURN_IF_ERROR(cuda::ChooseTiledBackThreads(m->tiled_, tasks.most_tasks_per_orbit()));
      // The forward's sums by map (kept zero between blocks by the combine), the
      // transpose's z by map, and a largest |z| per ART block (the last: the products').
      const size_t map_floats = static_cast<size_t>(cuda::TiledMapBufferFloats(columns));
      TOMO_ASSIGN_OR_RETURN(m->partials_, DeviceBuffer<float>::Allocate(map_floats, s));
      TOMO_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(m->partials_.get(), 0, m->partials_.size_bytes(), s));
      TOMO_ASSIGN_OR_RETURN(m->tiled_z_maps_, DeviceBuffer<float>::Allocate(map_floats, s));
      TOMO_ASSIGN_OR_RETURN(m->tiled_largest_z_, DeviceBuffer<int32_t>::Allocate(
          static_cast<size_t>(a.num_blocks()) + 1, s));
      if (kernels == SymmetricKernels::kTiledSweep) {
        TOMO_RETURN_IF_ERROR(m->PrepareSweep(tasks, tiled.orbit_warp_begin(), tiled.warps(),
                                             most_slot_buffers, allow_resident_x, s));
      }
    }
    for (int64_t b = 0; b < a.num_blocks(); ++b) m->geometry_.push_back(cuda::StoredGeometry(a, b));
    const size_t groups = static_cast<size_t>((columns + 31) / 32);
    TOMO_ASSIGN_OR_RETURN(m->group_counters_, DeviceBuffer<int32_t>::Allocate(groups, s));
    TOMO_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(m->group_counters_.get(), 0, groups * sizeof(int32_t), s));
    TOMO_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(s));
    return m;
  }

  uint64_t matrix_bytes() const override {
    return row_value_begin_.size_bytes() + row_run_begin_.size_bytes() +
           row_iy_first_.size_bytes() + runs_.size_bytes() + values_.size_bytes() +
           row_norm2_.size_bytes() + row_headers_.size_bytes() + dense_values_.size_bytes() +
           dense_offsets_.size_bytes() + dense_slabs_.size_bytes() + blocked_values_.size_bytes() +
           blocked_runs_.size_bytes() + blocked_headers_.size_bytes() +
           blocked_slabs_.size_bytes() + blocked_cursors_.size_bytes() +
           segmented_values_.size_bytes() + segmented_runs_.size_bytes() +
           segmented_slabs_.size_bytes() + segmented_table_.size_bytes() +
           tiled_local_.size_bytes() + tiled_weights_.size_bytes() +
           tiled_lane_rays_.size_bytes() + tiled_lane_switch_.size_bytes() +
           tiled_warps_.size_bytes() +
           tiled_orbit_warp_begin_.size_bytes() + tiled_orbits_.size_bytes() +
           tiled_column_bound_.size_bytes() + tiled_tasks_.size_bytes() +
           tiled_orbit_task_begin_.size_bytes() + tiled_transpose_order_.size_bytes() +
           sweep_owner_begin_.size_bytes() + sweep_owned_orbits_.size_bytes();
  }

  absl::Status Forward(const float* x, float* y) override {
    TOMO_ASSIGN_OR_RETURN(ScopedDevice scoped, ScopedDevice::Enter(device_));
    const cudaStream_t s = stream_.get();
    TOMO_ASSIGN_OR_RETURN(auto dx, DeviceBuffer<float>::Allocate(pixels(), s));
    TOMO_ASSIGN_OR_RETURN(auto dy, DeviceBuffer<float>::Allocate(projection_count(), s));
    TOMO_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dx.get(), x, dx.size_bytes(), cudaMemcpyHostToDevice, s));
    TOMO_RETURN_IF_ERROR(ForwardViewsOnDevice(AllViews(a_.scan().num_views()), dx.get(), dy.get()));
    TOMO_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(y, dy.get(), dy.size_bytes(), cudaMemcpyDeviceToHost, s));
    TOMO_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(s));
    return absl::OkStatus();
  }

  absl::Status Back(const float* y, float* x) override {
    TOMO_ASSIGN_OR_RETURN(ScopedDevice scoped, ScopedDevice::Enter(device_));
    const cudaStream_t s = stream_.get();
    TOMO_ASSIGN_OR_RETURN(auto dx, DeviceBuffer<float>::Allocate(pixels(), s));
    TOMO_ASSIGN_OR_RETURN(auto dy, DeviceBuffer<float>::Allocate(projection_count(), s));
    TOMO_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dy.get(), y, dy.size_bytes(), cudaMemcpyHostToDevice, s));
    TOMO_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(dx.get(), 0, dx.size_bytes(), s));
    TOMO_RETURN_IF_ERROR(BackViewsAddOnDevice(AllViews(a_.scan().num_views()), dy.get(), dx.get()));
    TOMO_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(x, dx.get(), dx.size_bytes(), cudaMemcpyDeviceToHost, s));
    TOMO_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(s));
    return absl::OkStatus();
  }

  absl::Status ForwardViewsOnDevice(const std::vector<int64_t>& views, const float* x,
                                    float* y) override {
    TOMO_ASSIGN_OR_RETURN(ScopedDevice scoped, ScopedDevice::Enter(device_));
    TOMO_ASSIGN_OR_RETURN(const std::vector<cuda::OrbitBlock> groups, cuda::GroupViews(a_, views));
    const float* x_transposed = nullptr;
    if (UsesTransposedImage()) {  // the caller's x has no transposed copy: make one
      TOMO_CUDA_RETURN_IF_ERROR(cuda::LaunchTranspose(x, x_transposed_.get(),
                                                      static_cast<int32_t>(a_.scan().nx()),
                                                      stream_.get()));
      x_transposed = x_transposed_.get();
    }
    for (const cuda::OrbitBlock& group : groups) {
      TOMO_RETURN_IF_ERROR(EnqueueForward(group, x, x_transposed, nullptr, nullptr, y));
    }
    return absl::OkStatus();
  }

  absl::Status BackViewsAddOnDevice(const std::vector<int64_t>& views, const float* z,
                                    float* x) override {
    TOMO_ASSIGN_OR_RETURN(ScopedDevice scoped, ScopedDevice::Enter(device_));
    TOMO_ASSIGN_OR_RETURN(const std::vector<cuda::OrbitBlock> groups, cuda::GroupViews(a_, views));
    for (const cuda::OrbitBlock& group : groups) {
      TOMO_RETURN_IF_ERROR(EnqueueBack(group, z, x, nullptr, /*clamp=*/false));
    }
    return absl::OkStatus();
  }

  cudaStream_t stream() const override { return stream_.get(); }
  bool one_launch_sweeps() const override { return sweep_shape_.thread_blocks > 0; }
  int sweep_slot_buffers() const override {
    return sweep_shape_.thread_blocks > 0 ? sweep_shape_.slot_buffers : 0;
  }
  bool sweep_resident_x() const override {
    return sweep_shape_.thread_blocks > 0 && sweep_shape_.resident_x;
  }

  absl::StatusOr<ArtResult> RunArt(const Array3D& projections, const ArtOptions& options,
                                   const RunContext& context) override {
    TOMO_RETURN_IF_ERROR(ValidateArtOptions(options, /*symmetric_format=*/true, a_.scan().num_views()));
    TOMO_RETURN_IF_ERROR(CheckProjections(projections, a_.scan().num_views(), a_.scan().columns()));
    TOMO_ASSIGN_OR_RETURN(ScopedDevice scoped, ScopedDevice::Enter(device_));
    const cudaStream_t s = stream_.get();
    TOMO_ASSIGN_OR_RETURN(ArtBuffers run, StartArt(projections, static_cast<int64_t>(pixels()), s));
    // The image's transposed copy starts as x does (zero); the orbit transpose keeps it.
    float* x_transposed = nullptr;
    if (UsesTransposedImage()) {
      TOMO_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(x_transposed_.get(), 0, x_transposed_.size_bytes(), s));
      x_transposed = x_transposed_.get();
    }
    std::vector<cuda::OrbitBlock> blocks;
    for (int64_t b = 0; b < a_.num_blocks(); ++b) {
      const SymmetricViewBlocks view_blocks(a_);
      const double bound = static_cast<double>(std::max<int64_t>(1, view_blocks.MaxRowsPerPixel(b)));
      blocks.push_back(cuda::OrbitOf(a_, b, static_cast<float>(options.relaxation / bound)));
    }
    if (sweep_shape_.thread_blocks > 0) {  // the sweep kernel reads the blocks from the device
      TOMO_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(sweep_blocks_.get(), blocks.data(),
                                                blocks.size() * sizeof(cuda::OrbitBlock),
                                                cudaMemcpyHostToDevice, s));
      TOMO_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(s));
    }
    ArtResult result;
    result.image = Array3D({1, a_.scan().ny(), a_.scan().nx()});
    const auto enqueue_sweep = [&]() -> absl::Status {
      if (UsesTiled()) return EnqueueTiledSweep(blocks, run, options.nonnegative);
      for (int64_t b = 0; b < a_.num_blocks(); ++b) {
        const cuda::OrbitBlock& block = blocks[static_cast<size_t>(b)];
        TOMO_RETURN_IF_ERROR(EnqueueForward(block, run.x.get(), x_transposed, run.b.get(),
                                            run.residual.get(), run.z.get()));
        TOMO_RETURN_IF_ERROR(
            EnqueueBack(block, run.z.get(), run.x.get(), x_transposed, options.nonnegative));
      }
      return absl::OkStatus();
    };
    return RunSweeps(run, options, context, enqueue_sweep, s, result);
  }

 private:
  DeviceSymmetricMatrix(const SymmetricSystemMatrix& a, int device) : a_(a), device_(device) {}
  bool UsesRuns() const {
    return kernels_ == SymmetricKernels::kGather || kernels_ == SymmetricKernels::kOrbit ||
           kernels_ == SymmetricKernels::kDenseOrbit;
  }
  bool UsesInterleaved() const { return kernels_ == SymmetricKernels::kBlocked; }
  bool UsesTiled() const {
    return kernels_ == SymmetricKernels::kTiled || kernels_ == SymmetricKernels::kTiledOverlap ||
           kernels_ == SymmetricKernels::kTiledFixed || kernels_ == SymmetricKernels::kTiledSweep;
  }
  // The transpose's accumulators in int32 fixed point.
  bool TiledFixedPoint() const {
    return kernels_ == SymmetricKernels::kTiledFixed || kernels_ == SymmetricKernels::kTiledSweep;
  }

  // kTiledSweep: the owners of the orbits for this device's thread blocks, when the sweep
  // kernel can run here (no thread blocks in sweep_shape_ otherwise: per-block launches).
  // Two thread blocks of half the threads per multiprocessor where the orbits are enough
  // (measured on an H200: 3% faster at 1024^2, 8% at 2048^2, with four orbits per
  // multiprocessor; slower at 512^2, where they are barely more than one), else one.
  // most_slot_buffers, allow_resident_x: what shared memory may hold (FitTiledSweep).
  absl::Status PrepareSweep(const TiledTasks& tasks, const std::vector<int64_t>& orbit_warp_begin,
                            const std::vector<TiledWarp>& warps, int most_slot_buffers,
                            bool allow_resident_x, cudaStream_t s) {
    for (const int per_multiprocessor : {2, 1}) {
      int thread_blocks = 0;
      TOMO_CUDA_RETURN_IF_ERROR(
          cuda::TiledSweepThreadBlocks(tiled_, per_multiprocessor, &thread_blocks));
      if (thread_blocks == 0) continue;
      const cuda::TiledSweepOwners owners = cuda::AssignTiledSweepOwners(
          tasks.orbit_task_begin(), tiled_.orbits_per_view, thread_blocks);
      cuda::TiledSweepShape shape;
      const cuda::TiledSweepStage stage = cuda::CountTiledSweepStage(
          owners, orbit_warp_begin, tasks.orbit_task_begin(), tiled_.orbits_per_view);
      const int64_t slots =
          cuda::CountTiledSweepSlots(owners, orbit_warp_begin, warps, tiled_.orbits_per_view);
      TOMO_CUDA_RETURN_IF_ERROR(cuda::FitTiledSweep(
          tiled_, thread_blocks, per_multiprocessor, owners.most_orbits, stage.warps, stage.tasks,
          slots, most_slot_buffers, allow_resident_x, &shape));
      if (shape.thread_blocks == 0) continue;
      TOMO_ASSIGN_OR_RETURN(sweep_owner_begin_, Upload(owners.begin, s));
      TOMO_ASSIGN_OR_RETURN(sweep_owned_orbits_, Upload(owners.orbits, s));
      TOMO_ASSIGN_OR_RETURN(sweep_blocks_, DeviceBuffer<cuda::OrbitBlock>::Allocate(
          static_cast<size_t>(a_.num_blocks()), s));
      sweep_shape_ = shape;
      return absl::OkStatus();
    }
    return absl::OkStatus();
  }

  // One ART sweep on the tiled layout: per block the forward (into the sums by map), the
  // combine (the residual, z by map and the block's largest |z|, the sums cleared) and the
  // transpose.
  absl::Status EnqueueTiledSweep(const std::vector<cuda::OrbitBlock>& blocks, ArtBuffers& run,
                                 bool clamp) {
    const cudaStream_t s = stream_.get();
    TOMO_CUDA_RETURN_IF_ERROR(
        cudaMemsetAsync(tiled_largest_z_.get(), 0, tiled_largest_z_.size_bytes(), s));
    if (sweep_shape_.thread_blocks > 0) {  // one launch; sweep_blocks_ holds `blocks` (RunArt)
      cuda::TiledSweep sweep;
      sweep.blocks = sweep_blocks_.get();
      sweep.block_count = static_cast<int32_t>(blocks.size());
      sweep.projections = run.b.get();
      sweep.residual = run.residual.get();
      sweep.sums = partials_.get();
      sweep.z_maps = tiled_z_maps_.get();
      sweep.largest_z_bits = tiled_largest_z_.get();
      sweep.x = run.x.get();
      sweep.clamp = clamp ? 1 : 0;
      sweep.prefetch = tiled_view_bytes_ <= kTiledPrefetchBytes ? 1 : 0;
      sweep.owner_begin = sweep_owner_begin_.get();
      sweep.owned_orbits = sweep_owned_orbits_.get();
      TOMO_CUDA_RETURN_IF_ERROR(cuda::LaunchTiledSweep(tiled_, sweep, sweep_shape_, s));
      return absl::OkStatus();
    }
    const bool overlap = kernels_ != SymmetricKernels::kTiled;
    const bool fixed_point = TiledFixedPoint();
    for (size_t b = 0; b < blocks.size(); ++b) {
      const cuda::OrbitBlock& block = blocks[b];
      // The first forward follows the memset: no overlap there.
      TOMO_RETURN_IF_ERROR(EnqueueTiledForward(block, run.x.get(), overlap && b > 0));
      cuda::TiledCombine combine;
      combine.sums = partials_.get();
      combine.projections = run.b.get();
      combine.residual = run.residual.get();
      combine.z_maps = tiled_z_maps_.get();
      combine.largest_z_bits = tiled_largest_z_.get() + b;
      TOMO_CUDA_RETURN_IF_ERROR(cuda::LaunchTiledCombine(tiled_, block, combine, overlap, s));
      const int next_view = overlap && tiled_view_bytes_ <= kTiledPrefetchBytes
                                ? blocks[(b + 1) % blocks.size()].stored_view
                                : -1;
      TOMO_CUDA_RETURN_IF_ERROR(cuda::LaunchTiledBack(tiled_, block, tiled_z_maps_.get(),
                                                      tiled_largest_z_.get() + b, next_view,
                                                      run.x.get(), clamp, overlap, fixed_point, s));
    }
    return absl::OkStatus();
  }
  // The tiled forward of one block into the sums by map (partials_).
  absl::Status EnqueueTiledForward(const cuda::OrbitBlock& block, const float* x, bool overlap) {
    const size_t v = static_cast<size_t>(block.stored_view);
    TOMO_CUDA_RETURN_IF_ERROR(cuda::LaunchTiledForward(
        tiled_, block.stored_view, tiled_forward_parts_[v], x, partials_.get(), overlap,
        stream_.get()));
    return absl::OkStatus();
  }
  bool UsesSegmented() const { return kernels_ == SymmetricKernels::kSegmented; }
  // The forward reads, and the orbit transpose keeps, a transposed copy of the image.
  bool UsesTransposedImage() const {
    return kernels_ == SymmetricKernels::kDenseOrbit || kernels_ == SymmetricKernels::kBlocked ||
           kernels_ == SymmetricKernels::kDense || kernels_ == SymmetricKernels::kSegmented;
  }
  bool UsesDense() const {
    return kernels_ == SymmetricKernels::kDense || kernels_ == SymmetricKernels::kDenseOrbit;
  }

  // The block's products (partials, then their sum: A x, or the residual and scaled residual
  // when projections is set; LaunchSymmetricCombine), with the chosen kernel.
  absl::Status EnqueueForward(const cuda::OrbitBlock& block, const float* x,
                              const float* x_transposed, const float* projections,
                              float* residual, float* out) {
    const cudaStream_t s = stream_.get();
    if (UsesTiled()) {  // sums by map (zero: the combine clears them), then their views' sums
      if (projections != nullptr) {  // not used: ART on this layout is EnqueueTiledSweep
        return absl::InternalError("tiled forward: the residual is formed by the combine");
      }
      TOMO_RETURN_IF_ERROR(EnqueueTiledForward(block, x, /*overlap=*/false));
      cuda::TiledCombine combine;
      combine.sums = partials_.get();
      combine.out = out;
      TOMO_CUDA_RETURN_IF_ERROR(cuda::LaunchTiledCombine(tiled_, block, combine, false, s));
      return absl::OkStatus();
    }
    if (UsesInterleaved() || UsesDense() || UsesSegmented()) {  // combine fused into the forward
      cuda::GroupCombine combine;
      combine.counters = group_counters_.get();
      combine.row_norm2 = row_norm2_.get();
      combine.projections = projections;
      combine.residual = residual;
      combine.out = out;
      const size_t b = static_cast<size_t>(block.stored_view);
      if (UsesSegmented()) {
        combine.segments = segmented_.segments;
        const int64_t per_view = static_cast<int64_t>(segmented_.groups_per_view) * segmented_.segments;
        TOMO_CUDA_RETURN_IF_ERROR(cuda::LaunchSegmentedForwardPartials(
            segmented_, block, static_cast<int64_t>(b) * per_view, per_view, x, x_transposed,
            partials_.get(), combine, s));
      } else if (UsesInterleaved()) {
        // Its warps hold all views; their last warp's serial sum of the segments was slow
        // (round 2): the combine kernel adds them.
        const int64_t first = blocked_view_begin_[b];
        TOMO_CUDA_RETURN_IF_ERROR(cuda::LaunchInterleavedForwardPartials(
            blocked_, block, first, blocked_view_begin_[b + 1] - first, x, x_transposed,
            partials_.get(), cuda::GroupCombine{}, s));
        TOMO_CUDA_RETURN_IF_ERROR(cuda::LaunchSymmetricCombine(arrays_, block, blocked_.segments,
                                                               partials_.get(), projections,
                                                               residual, out, s));
      } else {
        combine.segments = dense_.segments;
        const int64_t first = dense_view_begin_[b];
        TOMO_CUDA_RETURN_IF_ERROR(cuda::LaunchDenseForwardPartials(
            dense_, block, first, dense_view_begin_[b + 1] - first, x, x_transposed,
            partials_.get(), combine, s));
      }
      return absl::OkStatus();
    }
    TOMO_CUDA_RETURN_IF_ERROR(
        cuda::LaunchSymmetricForwardPartials(arrays_, block, segments_, x, partials_.get(), s));
    TOMO_CUDA_RETURN_IF_ERROR(cuda::LaunchSymmetricCombine(arrays_, block, segments_,
                                                           partials_.get(), projections, residual,
                                                           out, s));
    return absl::OkStatus();
  }

  // x += A_b^T z for the views of `block` (then the clamp), with the chosen kernel.
  absl::Status EnqueueBack(const cuda::OrbitBlock& block, const float* z, float* x,
                           float* x_transposed, bool clamp) {
    const cuda::StoredViewGeometry& g = geometry_[static_cast<size_t>(block.stored_view)];
    switch (kernels_) {
      case SymmetricKernels::kGather:
        TOMO_CUDA_RETURN_IF_ERROR(
            cuda::LaunchSymmetricBackGather(arrays_, g, block, z, x, clamp, stream_.get()));
        break;
      case SymmetricKernels::kOrbit:
      case SymmetricKernels::kDenseOrbit:
      case SymmetricKernels::kBlocked:
        TOMO_CUDA_RETURN_IF_ERROR(cuda::LaunchSymmetricBackOrbit(
            arrays_, g, block, maps_, z, x, x_transposed, clamp, stream_.get()));
        break;
      case SymmetricKernels::kSegmented:
        TOMO_CUDA_RETURN_IF_ERROR(cuda::LaunchSegmentedBackOrbit(
            segmented_, g, block, maps_, z, x, x_transposed, clamp, stream_.get()));
        break;
      case SymmetricKernels::kTiled:
      case SymmetricKernels::kTiledOverlap:
      case SymmetricKernels::kTiledFixed:
      case SymmetricKernels::kTiledSweep: {
        int32_t* largest = tiled_largest_z_.get() + (tiled_largest_z_.size() - 1);
        TOMO_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(largest, 0, sizeof(int32_t), stream_.get()));
        cuda::TiledCombine combine;
        combine.z_full = z;
        combine.z_maps = tiled_z_maps_.get();
        combine.largest_z_bits = largest;
        TOMO_CUDA_RETURN_IF_ERROR(
            cuda::LaunchTiledCombine(tiled_, block, combine, false, stream_.get()));
        TOMO_CUDA_RETURN_IF_ERROR(cuda::LaunchTiledBack(
            tiled_, block, tiled_z_maps_.get(), largest, /*next_stored_view=*/-1, x, clamp,
            /*overlap=*/false, TiledFixedPoint(), stream_.get()));
        break;
      }
      case SymmetricKernels::kDense: {
        const int64_t first = dense_view_begin_[static_cast<size_t>(block.stored_view)];
        const int64_t count = dense_view_begin_[static_cast<size_t>(block.stored_view) + 1] - first;
        TOMO_CUDA_RETURN_IF_ERROR(
            cuda::LaunchDenseBackAtomic(dense_, block, first, count, z, x, stream_.get()));
        if (x_transposed != nullptr) {  // the copy the next forward reads, clamped with x
          TOMO_CUDA_RETURN_IF_ERROR(cuda::LaunchClampAndTranspose(
              x, x_transposed, static_cast<int32_t>(a_.scan().nx()), clamp, stream_.get()));
        } else if (clamp) {
          TOMO_CUDA_RETURN_IF_ERROR(cuda::LaunchClampNonnegative(
              x, a_.scan().nx() * a_.scan().ny(), stream_.get()));
        }
        break;
      }
    }
    return absl::OkStatus();
  }
  size_t pixels() const { return static_cast<size_t>(a_.scan().nx() * a_.scan().ny()); }
  size_t projection_count() const { return static_cast<size_t>(a_.scan().rows()); }

  const SymmetricSystemMatrix& a_;
  int device_;
  Stream stream_;  // declared before the buffers: they are freed on it first
  DeviceBuffer<int64_t> row_value_begin_, row_run_begin_;
  DeviceBuffer<int32_t> row_iy_first_;
  DeviceBuffer<uint2> runs_;
  DeviceBuffer<uint4> row_headers_;
  DeviceBuffer<float> values_, row_norm2_, partials_;
  int segments_ = 1;
  SymmetricKernels kernels_ = kDefaultSymmetricKernels;
  cuda::SquareMapTable maps_{};
  DeviceBuffer<float> dense_values_, x_transposed_;
  DeviceBuffer<int32_t> group_counters_;
  DeviceBuffer<float> blocked_values_;
  DeviceBuffer<RunSlot> blocked_runs_;
  DeviceBuffer<RowHeader> blocked_headers_;
  DeviceBuffer<InterleavedSlab> blocked_slabs_;
  DeviceBuffer<uint16_t> blocked_cursors_;
  std::vector<int64_t> blocked_view_begin_;
  DeviceBuffer<float> segmented_values_;
  DeviceBuffer<uint32_t> segmented_runs_;
  DeviceBuffer<SegmentedSlab> segmented_slabs_;
  DeviceBuffer<uint8_t> segmented_table_;
  cuda::SegmentedDeviceArrays segmented_{};
  cuda::InterleavedDeviceArrays blocked_{};
  DeviceBuffer<uint16_t> dense_offsets_;
  DeviceBuffer<DenseSlab> dense_slabs_;
  std::vector<int64_t> dense_view_begin_;
  cuda::DenseDeviceArrays dense_{};
  cuda::SymmetricDeviceArrays arrays_{};
  DeviceBuffer<uint16_t> tiled_local_, tiled_lane_switch_;
  DeviceBuffer<uint32_t> tiled_lane_rays_;
  DeviceBuffer<float> tiled_weights_, tiled_column_bound_;
  DeviceBuffer<TiledWarp> tiled_warps_;
  DeviceBuffer<int64_t> tiled_orbit_warp_begin_;
  DeviceBuffer<TileOrbit> tiled_orbits_;
  DeviceBuffer<TiledTask> tiled_tasks_;
  DeviceBuffer<int64_t> tiled_orbit_task_begin_;
  DeviceBuffer<int32_t> tiled_transpose_order_;
  std::vector<int32_t> tiled_forward_parts_;  // per stored view (TiledTasks::forward_parts)
  DeviceBuffer<float> tiled_z_maps_;
  DeviceBuffer<int32_t> tiled_largest_z_;
  cuda::TiledDeviceArrays tiled_{};
  uint64_t tiled_view_bytes_ = 0;  // the slots of the largest stored view
  // kTiledSweep (PrepareSweep): the sweep kernel's shape (no thread blocks: per-block
  // launches), the orbits of its thread blocks, and the sweep's blocks (written by RunArt).
  cuda::TiledSweepShape sweep_shape_;
  DeviceBuffer<int32_t> sweep_owner_begin_, sweep_owned_orbits_;
  DeviceBuffer<cuda::OrbitBlock> sweep_blocks_;
  // Up to this, the transpose prefetches the next block's slots into L2 (kTiledOverlap):
  // the current block's stay there too (50 MB on an H100).
  static constexpr uint64_t kTiledPrefetchBytes = uint64_t{16} << 20;
  std::vector<cuda::StoredViewGeometry> geometry_;
};

class DeviceCsrMatrix final : public DeviceStoredMatrix {
 public:
  static absl::StatusOr<std::unique_ptr<DeviceCsrMatrix>> Create(const CsrSystemMatrix& a,
                                                                 int64_t views_per_block,
                                                                 int device) {
    TOMO_ASSIGN_OR_RETURN(ScopedDevice scoped, ScopedDevice::Enter(device));
    auto m = std::unique_ptr<DeviceCsrMatrix>(new DeviceCsrMatrix(a, device));
    TOMO_ASSIGN_OR_RETURN(m->stream_, Stream::Create());
    const cudaStream_t s = m->stream_.get();
    m->views_per_block_ = views_per_block;
    const CsrViewBlocks blocks(a, views_per_block == 0 ? 1 : views_per_block);
    std::vector<int32_t> block_views;
    for (int64_t b = 0; b < blocks.num_blocks(); ++b) {
      m->block_first_.push_back(static_cast<int64_t>(block_views.size()));
      for (const int64_t v : blocks.BlockViews(b)) block_views.push_back(static_cast<int32_t>(v));
      m->max_rows_.push_back(blocks.MaxRowsPerPixel(b));
    }
    m->block_first_.push_back(static_cast<int64_t>(block_views.size()));
    TOMO_ASSIGN_OR_RETURN(m->row_offsets_, Upload(a.row_offsets(), s));
    TOMO_ASSIGN_OR_RETURN(m->column_indices_, Upload(a.column_indices(), s));
    TOMO_ASSIGN_OR_RETURN(m->values_, Upload(a.values(), s));
    TOMO_ASSIGN_OR_RETURN(m->row_norm2_, Upload(a.RowNorms2(), s));
    TOMO_ASSIGN_OR_RETURN(m->block_views_, Upload(block_views, s));
    TOMO_ASSIGN_OR_RETURN(m->accumulator_, DeviceBuffer<float>::Allocate(static_cast<size_t>(a.pixels()), s));
    TOMO_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(m->accumulator_.get(), 0, m->accumulator_.size_bytes(), s));
    m->arrays_ = {m->row_offsets_.get(), m->column_indices_.get(), m->values_.get(),
                  m->row_norm2_.get(), static_cast<int32_t>(a.detector_columns())};
    TOMO_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(s));
    return m;
  }

  uint64_t matrix_bytes() const override {
    return row_offsets_.size_bytes() + column_indices_.size_bytes() + values_.size_bytes() +
           row_norm2_.size_bytes();
  }

  absl::Status Forward(const float* x, float* y) override {
    TOMO_ASSIGN_OR_RETURN(ScopedDevice scoped, ScopedDevice::Enter(device_));
    const cudaStream_t s = stream_.get();
    TOMO_ASSIGN_OR_RETURN(auto dx, DeviceBuffer<float>::Allocate(static_cast<size_t>(a_.pixels()), s));
    TOMO_ASSIGN_OR_RETURN(auto dy, DeviceBuffer<float>::Allocate(static_cast<size_t>(a_.rows()), s));
    TOMO_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dx.get(), x, dx.size_bytes(), cudaMemcpyHostToDevice, s));
    TOMO_RETURN_IF_ERROR(ForwardViewsOnDevice(AllViews(a_.views()), dx.get(), dy.get()));
    TOMO_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(y, dy.get(), dy.size_bytes(), cudaMemcpyDeviceToHost, s));
    TOMO_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(s));
    return absl::OkStatus();
  }

  absl::Status Back(const float* y, float* x) override {
    TOMO_ASSIGN_OR_RETURN(ScopedDevice scoped, ScopedDevice::Enter(device_));
    const cudaStream_t s = stream_.get();
    TOMO_ASSIGN_OR_RETURN(auto dx, DeviceBuffer<float>::Allocate(static_cast<size_t>(a_.pixels()), s));
    TOMO_ASSIGN_OR_RETURN(auto dy, DeviceBuffer<float>::Allocate(static_cast<size_t>(a_.rows()), s));
    TOMO_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dy.get(), y, dy.size_bytes(), cudaMemcpyHostToDevice, s));
    TOMO_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(dx.get(), 0, dx.size_bytes(), s));
    TOMO_RETURN_IF_ERROR(BackViewsAddOnDevice(AllViews(a_.views()), dy.get(), dx.get()));
    TOMO_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(x, dx.get(), dx.size_bytes(), cudaMemcpyDeviceToHost, s));
    TOMO_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(s));
    return absl::OkStatus();
  }

  absl::Status ForwardViewsOnDevice(const std::vector<int64_t>& views, const float* x,
                                    float* y) override {
    TOMO_ASSIGN_OR_RETURN(ScopedDevice scoped, ScopedDevice::Enter(device_));
    TOMO_RETURN_IF_ERROR(CheckViews(views, a_.views()));
    if (views.empty()) return absl::OkStatus();
    const cudaStream_t s = stream_.get();
    TOMO_ASSIGN_OR_RETURN(auto d_views, UploadViews(views, s));
    TOMO_CUDA_RETURN_IF_ERROR(cuda::LaunchCsrBlockForward(arrays_, d_views.get(),
                                                          static_cast<int32_t>(views.size()), 0.0f,
                                                          x, nullptr, nullptr, y, s));
    return absl::OkStatus();
  }

  absl::Status BackViewsAddOnDevice(const std::vector<int64_t>& views, const float* z,
                                    float* x) override {
    TOMO_ASSIGN_OR_RETURN(ScopedDevice scoped, ScopedDevice::Enter(device_));
    TOMO_RETURN_IF_ERROR(CheckViews(views, a_.views()));
    if (views.empty()) return absl::OkStatus();
    const cudaStream_t s = stream_.get();
    TOMO_ASSIGN_OR_RETURN(auto d_views, UploadViews(views, s));
    TOMO_CUDA_RETURN_IF_ERROR(cuda::LaunchCsrBlockBack(arrays_, d_views.get(),
                                                       static_cast<int32_t>(views.size()), z,
                                                       /*z_compact=*/true, accumulator_.get(), s));
    TOMO_CUDA_RETURN_IF_ERROR(cuda::LaunchAddAndClear(x, accumulator_.get(), a_.pixels(),
                                                      /*clamp=*/false, s));
    return absl::OkStatus();
  }

  cudaStream_t stream() const override { return stream_.get(); }

  absl::StatusOr<ArtResult> RunArt(const Array3D& projections, const ArtOptions& options,
                                   const RunContext& context) override {
    TOMO_RETURN_IF_ERROR(ValidateArtOptions(options, /*symmetric_format=*/false, a_.views()));
    if (options.views_per_block != views_per_block_) {
      return absl::InvalidArgumentError(absl::StrCat(
          "views_per_block: ", options.views_per_block, " must be ", views_per_block_,
          ", the value the matrix was uploaded with"));
    }
    TOMO_RETURN_IF_ERROR(CheckProjections(projections, a_.views(), a_.detector_columns()));
    TOMO_ASSIGN_OR_RETURN(ScopedDevice scoped, ScopedDevice::Enter(device_));
    const cudaStream_t s = stream_.get();
    TOMO_ASSIGN_OR_RETURN(ArtBuffers run, StartArt(projections, a_.pixels(), s));
    ArtResult result;
    result.image = Array3D({1, a_.ny(), a_.nx()});
    const int64_t blocks = static_cast<int64_t>(max_rows_.size());
    const auto enqueue_sweep = [&]() -> absl::Status {
      for (int64_t b = 0; b < blocks; ++b) {
        const int32_t* views = block_views_.get() + block_first_[static_cast<size_t>(b)];
        const int32_t count = static_cast<int32_t>(block_first_[static_cast<size_t>(b) + 1] -
                                                   block_first_[static_cast<size_t>(b)]);
        const float step_scale = static_cast<float>(
            options.relaxation / static_cast<double>(std::max<int64_t>(1, max_rows_[static_cast<size_t>(b)])));
        TOMO_CUDA_RETURN_IF_ERROR(cuda::LaunchCsrBlockForward(arrays_, views, count, step_scale,
                                                              run.x.get(), run.b.get(),
                                                              run.residual.get(), run.z.get(), s));
        TOMO_CUDA_RETURN_IF_ERROR(cuda::LaunchCsrBlockBack(arrays_, views, count, run.z.get(),
                                                           /*z_compact=*/false,
                                                           accumulator_.get(), s));
        TOMO_CUDA_RETURN_IF_ERROR(cuda::LaunchAddAndClear(run.x.get(), accumulator_.get(),
                                                          a_.pixels(), options.nonnegative, s));
      }
      return absl::OkStatus();
    };
    return RunSweeps(run, options, context, enqueue_sweep, s, result);
  }

 private:
  DeviceCsrMatrix(const CsrSystemMatrix& a, int device) : a_(a), device_(device) {}
  static absl::StatusOr<DeviceBuffer<int32_t>> UploadViews(const std::vector<int64_t>& views,
                                                           cudaStream_t s) {
    std::vector<int32_t> narrow(views.begin(), views.end());
    // A copy from pageable memory is staged before cudaMemcpyAsync returns: `narrow` may go.
    return Upload(narrow, s);
  }
  const CsrSystemMatrix& a_;
  int device_;
  Stream stream_;
  DeviceBuffer<int64_t> row_offsets_;
  DeviceBuffer<int32_t> column_indices_, block_views_;
  DeviceBuffer<float> values_, row_norm2_, accumulator_;
  int64_t views_per_block_ = 0;
  std::vector<int64_t> block_first_;
  std::vector<int64_t> max_rows_;
  cuda::CsrDeviceArrays arrays_{};
};

}  // namespace

const char* SymmetricKernelsName(SymmetricKernels kernels) {
  switch (kernels) {
    case SymmetricKernels::kGather:
      return "gather";
    case SymmetricKernels::kOrbit:
      return "orbit";
    case SymmetricKernels::kDense:
      return "dense";
    case SymmetricKernels::kDenseOrbit:
      return "dense-orbit";
    case SymmetricKernels::kBlocked:
      return "blocked";
    case SymmetricKernels::kSegmented:
      return "segmented";
    case SymmetricKernels::kTiled:
      return "tiled";
    case SymmetricKernels::kTiledOverlap:
      return "tiled-overlap";
    case SymmetricKernels::kTiledFixed:
      return "tiled-fixed";
    case SymmetricKernels::kTiledSweep:
      return "tiled-sweep";
  }
  return "?";
}

std::vector<SymmetricKernels> AllSymmetricKernels() {
  return {SymmetricKernels::kGather, SymmetricKernels::kOrbit, SymmetricKernels::kDense,
          SymmetricKernels::kDenseOrbit, SymmetricKernels::kBlocked, SymmetricKernels::kSegmented,
          SymmetricKernels::kTiled, SymmetricKernels::kTiledOverlap,
          SymmetricKernels::kTiledFixed, SymmetricKernels::kTiledSweep};
}

absl::StatusOr<SymmetricKernels> ParseSymmetricKernels(const std::string& name) {
  std::string names;
  for (const SymmetricKernels k : AllSymmetricKernels()) {
    if (name == SymmetricKernelsName(k)) return k;
    absl::StrAppend(&names, names.empty() ? "" : ", ", SymmetricKernelsName(k));
  }
  return absl::InvalidArgumentError(
      absl::StrCat("kernel: '", name, "' is not one of ", names));
}

absl::StatusOr<std::unique_ptr<DeviceStoredMatrix>> UploadSymmetricMatrix(
    const SymmetricSystemMatrix& matrix, int device, SymmetricKernels kernels, int slab_steps,
    int most_slot_buffers, bool allow_resident_x) {
  TOMO_ASSIGN_OR_RETURN(auto m, DeviceSymmetricMatrix::Create(matrix, device, kernels, slab_steps,
                                                              most_slot_buffers, allow_resident_x));
  return std::unique_ptr<DeviceStoredMatrix>(std::move(m));
}

absl::StatusOr<std::unique_ptr<DeviceStoredMatrix>> UploadCsrMatrix(const CsrSystemMatrix& matrix,
                                                                    int64_t views_per_block,
                                                                    int device) {
  TOMO_ASSIGN_OR_RETURN(auto m, DeviceCsrMatrix::Create(matrix, views_per_block, device));
  return std::unique_ptr<DeviceStoredMatrix>(std::move(m));
}

}  // namespace tomo::core::system_matrix
