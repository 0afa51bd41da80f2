#include "core/statistical/cuda/icd_cuda.h"

#include <cuda_runtime.h>

#include <chrono>
#include <cmath>
#include <limits>
#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "core/operators/cuda/cuda_check.h"
#include "core/operators/cuda/cuda_memory_pool.h"
#include "core/operators/cuda/cuda_resources.h"
#include "core/statistical/cuda/icd_kernels.h"
#include "core/statistical/icd_problem.h"
#include "core/statistical/update_schedule.h"
#include "core/statistical/z_voxel_groups.h"

namespace tomo::core::statistical {
namespace {

using core::cuda::DeviceBuffer;
using core::cuda::Event;
using core::cuda::FreeDeviceBytes;
using core::cuda::ScopedDevice;
using core::cuda::Stream;
using cuda::IcdDeviceProblem;
using cuda::IcdGroupScratch;
using cuda::IcdGroupShape;
using cuda::IcdStepTask;

static_assert(cuda::kIcdMaxGroupsPerStep >= UpdateSchedule::kMaxColumnsPerStep,
              "a device step holds the groups of every column of a step");

// An instantiated CUDA graph, destroyed with its owner.
class GraphExec {
 public:
  GraphExec() = default;
  GraphExec(GraphExec&& other) noexcept : exec_(std::exchange(other.exec_, nullptr)) {}
  GraphExec& operator=(GraphExec&&) = delete;
  ~GraphExec() {
    if (exec_ != nullptr) cudaGraphExecDestroy(exec_);
  }
  cudaGraphExec_t* out() { return &exec_; }
  cudaGraphExec_t get() const { return exec_; }

 private:
  cudaGraphExec_t exec_ = nullptr;
};

class Graph {
 public:
  ~Graph() {
    if (graph_ != nullptr) cudaGraphDestroy(graph_);
  }
  cudaGraph_t* out() { return &graph_; }
  cudaGraph_t get() const { return graph_; }

 private:
  cudaGraph_t graph_ = nullptr;
};

// Waits for the stream when leaving the run by any path (an error or a cancellation with
// work queued), before the graph and the buffers that work uses go away.
class SyncOnExit {
 public:
  explicit SyncOnExit(cudaStream_t stream) : stream_(stream) {}
  ~SyncOnExit() { cudaStreamSynchronize(stream_); }
  SyncOnExit(const SyncOnExit&) = delete;
  SyncOnExit& operator=(const SyncOnExit&) = delete;

 private:
  cudaStream_t stream_;
};

template <typename T>
absl::StatusOr<DeviceBuffer<T>> Upload(const std::vector<T>& host, cudaStream_t stream) {
  TOMO_ASSIGN_OR_RETURN(auto buffer, DeviceBuffer<T>::Allocate(host.size(), stream));
  TOMO_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(buffer.get(), host.data(), host.size() * sizeof(T),
                                            cudaMemcpyHostToDevice, stream));
  return buffer;
}

struct CostParts {
  double data = 0, squares = 0, prior = 0;
};

absl::StatusOr<CostParts> DeviceCost(const IcdDeviceProblem& problem, double* partials,
                                     cudaStream_t stream) {
  TOMO_CUDA_RETURN_IF_ERROR(cuda::LaunchIcdCostTerms(problem, partials, stream));
  std::vector<double> host(3 * cuda::kIcdCostBlocks);
  TOMO_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(host.data(), partials, host.size() * sizeof(double),
                                            cudaMemcpyDeviceToHost, stream));
  TOMO_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  CostParts parts;
  for (int b = 0; b < cuda::kIcdCostBlocks; ++b) {
    parts.data += host[b];
    parts.squares += host[cuda::kIcdCostBlocks + b];
    parts.prior += host[2 * cuda::kIcdCostBlocks + b];
  }
  return parts;
}

absl::Status LaunchGroupStep(const IcdDeviceProblem& problem, const IcdGroupScratch& scratch,
                             const IcdGroupShape& shape, cudaStream_t stream) {
  TOMO_CUDA_RETURN_IF_ERROR(
      cuda::LaunchIcdGroupBackProjectAndUpdate(problem, scratch, shape, stream));
  TOMO_CUDA_RETURN_IF_ERROR(cuda::LaunchIcdGroupForward(problem, scratch, shape, stream));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<IcdResult> ReconstructIcdCuda(const SeparableFootprintProjector& projector,
                                             const Array3D& line_integrals,
                                             const Array3D& weights,
                                             const Array3D* start_volume,
                                             const IcdOptions& options, int device,
                                             const IcdCudaTuning& tuning,
                                             const RunContext& context) {
  const auto setup_start = std::chrono::steady_clock::now();
  TOMO_ASSIGN_OR_RETURN(IcdProblem host,
                        PrepareIcdProblem(projector, line_integrals, weights, start_volume,
                                          options, ResidualStart::kLeaveEmpty));
  const ZVoxelGroups groups = ZVoxelGroups::Find(projector, options.grouping);
  const UpdateSchedule schedule =
      UpdateSchedule::Make(projector, groups, host.column_order, options.columns_per_step);
  const Size3 n = host.size;
  const VolumeGeometry& volume = projector.volume();

  // The steps of an iteration (only the first step_limit when benchmarking a partial one),
  // in the iteration's order (UpdateSchedule::IterationStepOrder, as the CPU reference): a
  // new task list every iteration, uploaded before its first launch.
  const int64_t steps = tuning.step_limit > 0 ? std::min(tuning.step_limit, schedule.num_steps())
                                              : schedule.num_steps();
  std::vector<IcdStepTask> tasks(static_cast<size_t>(steps));
  auto fill_tasks = [&](int64_t iteration) {
    const std::vector<int64_t> order =
        schedule.IterationStepOrder(options.column_order_seed, iteration);
    for (int64_t i = 0; i < steps; ++i) {
      IcdStepTask& task = tasks[static_cast<size_t>(i)];
      for (cuda::IcdGroupTask& g : task.groups) g = {0, 0, 1, 0};
      int slot = 0;
      const int64_t step = order[static_cast<size_t>(i)];
      for (const ScheduledGroup* g = schedule.StepBegin(step); g != schedule.StepEnd(step); ++g) {
        task.groups[slot++] = {g->column, g->first_slice, g->stride, g->size};
      }
    }
  };
  fill_tasks(1);

  TOMO_ASSIGN_OR_RETURN(ScopedDevice scoped, ScopedDevice::Enter(device));
  static_assert(sizeof(IcdStepTask) == kIcdStepTaskBytes, "IcdDeviceBytes counts the tasks");
  const uint64_t needed = IcdDeviceBytes(volume, projector.projection_dims(),
                                         static_cast<int64_t>(tasks.size()));
  uint64_t budget = context.memory_budget_bytes;
  if (budget == 0) {
    TOMO_ASSIGN_OR_RETURN(budget, FreeDeviceBytes());
  }
  if (needed > budget) {
    return absl::ResourceExhaustedError(
        absl::StrCat("icd: needs ", needed, " bytes of device memory (volume, residual, "
                     "weights, group tasks), more than the budget of ", budget, " bytes"));
  }

  TOMO_ASSIGN_OR_RETURN(Stream stream, Stream::Create());
  const cudaStream_t s = stream.get();
  // Residual starts as -y; the start volume's projection is added on the device.
  for (size_t i = 0; i < host.line_integrals.size(); ++i) {
    host.line_integrals[i] = -host.line_integrals[i];
  }
  TOMO_ASSIGN_OR_RETURN(auto d_volume, Upload(host.volume, s));
  TOMO_ASSIGN_OR_RETURN(auto d_residual, Upload(host.line_integrals, s));
  TOMO_ASSIGN_OR_RETURN(auto d_weights, Upload(host.weights, s));
  TOMO_ASSIGN_OR_RETURN(auto d_views, Upload(projector.FloatViews(), s));
  TOMO_ASSIGN_OR_RETURN(auto d_tasks, Upload(tasks, s));

  IcdDeviceProblem problem;
  problem.volume = d_volume.get();
  problem.residual = d_residual.get();
  problem.weights = d_weights.get();
  problem.views = d_views.get();
  problem.nx = static_cast<int>(n.x);
  problem.ny = static_cast<int>(n.y);
  problem.nz = static_cast<int>(n.z);
  problem.num_views = static_cast<int>(projector.num_views());
  problem.rows = static_cast<int>(projector.rows());
  problem.columns = static_cast<int>(projector.columns());
  problem.voxel_x = static_cast<float>(volume.voxel_size_mm().x);
  problem.voxel_y = static_cast<float>(volume.voxel_size_mm().y);
  problem.voxel_z = static_cast<float>(volume.voxel_size_mm().z);
  problem.x0 = static_cast<float>(volume.x_mm(0));
  problem.y0 = static_cast<float>(volume.y_mm(0));
  problem.z0 = static_cast<float>(volume.z_mm(0));
  const QggmrfCoefficientsT<double> k = QggmrfCoefficients(options.prior);
  problem.prior = {static_cast<float>(k.p), static_cast<float>(k.q),
                   static_cast<float>(k.inv_c_sigma), static_cast<float>(k.inv_p_sigma_p),
                   static_cast<float>(k.min_difference)};
  for (int j = 0; j < 26; ++j) {
    problem.neighbour_weights[j] = static_cast<float>(options.prior.neighbour_weights[j]);
  }
  if (start_volume != nullptr) {
    TOMO_CUDA_RETURN_IF_ERROR(cuda::LaunchIcdForwardVolume(problem, s));
  }

  const bool v4 = tuning.kernel == IcdKernel::kPersistentV4;
  const bool persistent = tuning.kernel == IcdKernel::kPersistent || v4;
  // The launch-per-step kernels' scratch (a token allocation for the persistent path).
  const IcdGroupShape shape = cuda::MakeIcdGroupShape(
      static_cast<int>(schedule.max_step_voxels()), problem.num_views);
  const size_t group_slots = persistent ? 1 : static_cast<size_t>(shape.grid_x) * shape.kx;
  const size_t partial_floats =
      persistent ? 1 : 2 * static_cast<size_t>(shape.grid_y) * group_slots;
  TOMO_ASSIGN_OR_RETURN(auto d_partial, DeviceBuffer<float>::Allocate(partial_floats, s));
  TOMO_ASSIGN_OR_RETURN(auto d_delta, DeviceBuffer<float>::Allocate(group_slots, s));
  TOMO_ASSIGN_OR_RETURN(auto d_counters, DeviceBuffer<unsigned>::Allocate(2, s));
  TOMO_ASSIGN_OR_RETURN(auto d_cost, DeviceBuffer<double>::Allocate(3 * cuda::kIcdCostBlocks, s));
  TOMO_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(d_counters.get(), 0, 2 * sizeof(unsigned), s));
  IcdGroupScratch scratch;
  scratch.partial_theta = d_partial.get();
  scratch.delta = d_delta.get();
  scratch.ticket = d_counters.get();
  scratch.cursor = d_counters.get() + 1;
  scratch.tasks = d_tasks.get();

  // The persistent path's scratch: theta partials per (view, voxel of the step) and the
  // changes.
  int persistent_blocks = 0;
  int persistent_threads = cuda::IcdPersistentThreads(schedule.max_step_voxels());
  if (v4) {
    persistent_threads = tuning.v4_threads > 0
                             ? tuning.v4_threads
                             : cuda::IcdPersistentV4Threads(schedule.max_step_voxels(),
                                                            tuning.v4_voxels_per_thread);
  }
  cuda::IcdPersistentScratch persistent_scratch;
  DeviceBuffer<float2> d_theta_partial;
  DeviceBuffer<float> d_persistent_delta;
  cuda::IcdV4Sync v4_sync;
  DeviceBuffer<unsigned long long> d_v4_change;
  DeviceBuffer<unsigned> d_v4_view_done;
  unsigned v4_epoch = 0;  // the last step's epoch (IcdV4Launch)
  if (persistent) {
    TOMO_CUDA_RETURN_IF_ERROR(
        v4 ? cuda::IcdPersistentV4GridBlocks(problem.num_views, persistent_threads,
                                             tuning.v4_voxels_per_thread, &persistent_blocks)
           : cuda::IcdPersistentGridBlocks(problem.num_views, persistent_threads,
                                           &persistent_blocks));
    if (tuning.persistent_blocks > 0) {
      persistent_blocks = std::min(persistent_blocks, tuning.persistent_blocks);
    }
    const size_t slots = static_cast<size_t>(std::max<int64_t>(1, schedule.max_step_voxels()));
    const int view_group_shift = std::clamp(tuning.partial_view_group_shift, 0,
                                            kIcdMaxViewGroupShift);
    const size_t views_together = size_t{1} << view_group_shift;
    const size_t partial_views =
        (static_cast<size_t>(problem.num_views) + views_together - 1) / views_together *
        views_together;
    if (slots * partial_views > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
      return absl::InvalidArgumentError(absl::StrCat(
          "icd: a step's voxels (", slots, ") times the views (", problem.num_views,
          ") exceed the persistent kernels' partials index (2^31)"));
    }
    TOMO_ASSIGN_OR_RETURN(d_theta_partial,
                          DeviceBuffer<float2>::Allocate(slots * partial_views, s));
    persistent_scratch.view_group_shift = view_group_shift;
    TOMO_ASSIGN_OR_RETURN(d_persistent_delta, DeviceBuffer<float>::Allocate(slots, s));
    persistent_scratch.theta_partial = d_theta_partial.get();
    persistent_scratch.delta = d_persistent_delta.get();
    persistent_scratch.tasks = d_tasks.get();
    persistent_scratch.slots = static_cast<int>(slots);
    if (v4) {
      TOMO_ASSIGN_OR_RETURN(d_v4_change, DeviceBuffer<unsigned long long>::Allocate(slots, s));
      TOMO_ASSIGN_OR_RETURN(d_v4_view_done, DeviceBuffer<unsigned>::Allocate(
                                                static_cast<size_t>(persistent_blocks), s));
      TOMO_CUDA_RETURN_IF_ERROR(
          cudaMemsetAsync(d_v4_change.get(), 0, slots * sizeof(unsigned long long), s));
      TOMO_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(
          d_v4_view_done.get(), 0, static_cast<size_t>(persistent_blocks) * sizeof(unsigned), s));
      v4_sync.change = d_v4_change.get();
      v4_sync.view_done = d_v4_view_done.get();
    }
  }

  // One graph of groups_per_graph group steps, replayed.
  const int64_t per_graph = persistent ? 0 : tuning.groups_per_graph;
  Graph graph;
  GraphExec graph_exec;
  if (per_graph > 0 && static_cast<int64_t>(tasks.size()) >= per_graph) {
    TOMO_CUDA_RETURN_IF_ERROR(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    absl::Status captured = absl::OkStatus();
    for (int64_t i = 0; i < per_graph && captured.ok(); ++i) {
      captured = LaunchGroupStep(problem, scratch, shape, s);
    }
    TOMO_CUDA_RETURN_IF_ERROR(cudaStreamEndCapture(s, graph.out()));
    TOMO_RETURN_IF_ERROR(captured);
    TOMO_CUDA_RETURN_IF_ERROR(cudaGraphInstantiate(graph_exec.out(), graph.get(), 0));
  }

  const SyncOnExit sync_on_exit(s);

  IcdResult result;
  result.total_groups = schedule.num_groups();
  result.steps = schedule.num_steps();
  result.paired_columns = schedule.paired_columns();
  result.max_group_size = groups.max_group_size();
  result.mean_group_size = groups.mean_group_size();
  TOMO_ASSIGN_OR_RETURN(const CostParts initial, DeviceCost(problem, d_cost.get(), s));
  result.initial_cost = initial.data + initial.prior;
  result.setup_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - setup_start).count();

  std::vector<Event> in_flight_events;
  for (int j = 0; j < std::max(1, tuning.graphs_in_flight); ++j) {
    TOMO_ASSIGN_OR_RETURN(Event event, Event::Create());
    in_flight_events.push_back(std::move(event));
  }
  const int64_t total = static_cast<int64_t>(tasks.size());
  for (int64_t iteration = 1; iteration <= options.iterations; ++iteration) {
    const auto start = std::chrono::steady_clock::now();
    if (iteration > 1) {
      // The previous iteration's kernels are done (the stream was synchronised after them),
      // so the tasks can be rewritten and copied now.
      fill_tasks(iteration);
      TOMO_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(d_tasks.get(), tasks.data(),
                                                tasks.size() * sizeof(IcdStepTask),
                                                cudaMemcpyHostToDevice, s));
    }
    TOMO_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(scratch.cursor, 0, sizeof(unsigned), s));
    int64_t done = 0;
    int64_t batch = 0;
    while (done < total) {
      TOMO_RETURN_IF_ERROR(context.CheckCancelled(
          absl::StrCat("icd / iteration ", iteration, " / step ", done, " of ", total)));
      // Keep at most graphs_in_flight batches queued, so that a cancellation stops soon.
      Event& slot = in_flight_events[static_cast<size_t>(batch) % in_flight_events.size()];
      if (batch >= static_cast<int64_t>(in_flight_events.size())) {
        TOMO_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(slot.get()));
      }
      if (v4) {
        const int64_t step = std::min<int64_t>(std::max(1, tuning.steps_per_launch), total - done);
        cuda::IcdV4Launch launch;
        launch.first_step = static_cast<int>(done);
        launch.last_step = static_cast<int>(done + step);
        launch.epoch_base = v4_epoch;
        launch.flags = tuning.v4_flags ? 1 : 0;
        launch.prefetch = tuning.v4_prefetch ? 1 : 0;
        launch.l1_prefetch = tuning.v4_l1_prefetch ? 1 : 0;
        launch.voxels_per_thread = tuning.v4_voxels_per_thread;
        launch.poll_sleep = tuning.v4_poll_sleep ? 1 : 0;
        TOMO_CUDA_RETURN_IF_ERROR(cuda::LaunchIcdPersistentV4Steps(
            problem, persistent_scratch, v4_sync, launch, persistent_threads, persistent_blocks,
            s));
        v4_epoch += static_cast<unsigned>(step);
        done += step;
      } else if (persistent) {
        const int64_t step = std::min<int64_t>(std::max(1, tuning.steps_per_launch), total - done);
        TOMO_CUDA_RETURN_IF_ERROR(cuda::LaunchIcdPersistentSteps(
            problem, persistent_scratch, persistent_threads, persistent_blocks,
            static_cast<int>(done),
            static_cast<int>(done + step), s));
        done += step;
      } else if (graph_exec.get() != nullptr && total - done >= per_graph) {
        TOMO_CUDA_RETURN_IF_ERROR(cudaGraphLaunch(graph_exec.get(), s));
        done += per_graph;
      } else {
        const int64_t step = per_graph > 0 ? std::min(per_graph, total - done)
                                           : std::min<int64_t>(256, total - done);
        for (int64_t i = 0; i < step; ++i) {
          TOMO_RETURN_IF_ERROR(LaunchGroupStep(problem, scratch, shape, s));
        }
        done += step;
      }
      TOMO_CUDA_RETURN_IF_ERROR(cudaEventRecord(slot.get(), s));
      ++batch;
    }
    TOMO_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(s));
    IcdIterationRecord record;
    record.iteration = iteration;
    record.seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    TOMO_ASSIGN_OR_RETURN(const CostParts parts, DeviceCost(problem, d_cost.get(), s));
    record.data_term = parts.data;
    record.prior_term = parts.prior;
    record.cost = parts.data + parts.prior;
    record.relative_residual = host.line_integrals_norm2 > 0
                                   ? std::sqrt(parts.squares / host.line_integrals_norm2)
                                   : std::sqrt(parts.squares);
    result.iterations.push_back(record);
    if (tuning.on_iteration_volume) {
      TOMO_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(host.volume.data(), d_volume.get(),
                                                host.volume.size() * sizeof(float),
                                                cudaMemcpyDeviceToHost, s));
      TOMO_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(s));
      tuning.on_iteration_volume(iteration, VolumeFromZFastest(host.volume, n));
    }
    ProgressUpdate update;
    update.fraction = static_cast<double>(iteration) / static_cast<double>(options.iterations);
    update.stage = "icd";
    update.iteration = static_cast<uint32_t>(iteration);
    update.iterations_total = static_cast<uint32_t>(options.iterations);
    update.relative_residual = record.relative_residual;
    update.cost = record.cost;
    context.Report(update);
  }

  TOMO_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(host.volume.data(), d_volume.get(),
                                            host.volume.size() * sizeof(float),
                                            cudaMemcpyDeviceToHost, s));
  TOMO_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(s));
  result.volume = VolumeFromZFastest(host.volume, n);
  return result;
}

}  // namespace tomo::core::statistical
