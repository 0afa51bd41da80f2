// system-matrix-bench: ART on the stored 2D fan-beam system matrix (core/system_matrix),
// the symmetric format on our kernels beside the same iteration through cuSPARSE's CSR
// SpMV and SpMV-transpose (issue 19's benchmark), printed as a table and written as JSON.
//
// Scan: 720 views over 2 pi starting half a step off 0 (so every orbit of the square
// symmetry has eight views and 90 are stored), 1024 detector columns of 0.69 mm on a flat
// detector, source-origin 570 mm, origin-detector 470 mm (the fan covers the whole grid);
// grid n x n over 256 mm (n = 512, 1024, 2048). Data: the modified Shepp-Logan phantom
// (radius 120 mm), its exact line integrals (2 per element); truth: rasterised (2x2).
//
// For each n:
//   bytes       CSR (int64 row offsets, int32 columns, float32 values) and symmetric
//               (matrix_memory.h; both from the counting pass) and their ratio;
//   build       seconds to build the symmetric matrix on the device (kernels, then brought
//               back to the host) and on the CPU (all threads; the two must agree), to
//               upload it, and to expand it to block-ordered CSR for cuSPARSE;
//   ours        per kernel variant (--kernel, DeviceStoredMatrix's SymmetricKernels; all by
//               default, one line each): the upload's seconds ("layout built" when it built
//               the tiled layout; later tiled variants of the same tile side reuse the one the
//               matrix keeps), seconds per block-ART iteration on the device (the
//               difference between runs of 2 and 2 + --iterations sweeps, so setup and
//               transfers cancel), and the whole products A x and A^T y alone (CUDA events),
//               which split the sweep's time between its two passes; with --sweep-times,
//               each timed sweep as the host saw it (its residual check included);
//   cusparse    the same iteration (same blocks: the orbits, same steps, same clamp) with
//               cusparseSpMV NON_TRANSPOSE and TRANSPOSE (default algorithm, beta = 1 into x
//               for the transpose) on one CSR descriptor per block (32-bit indices), one
//               sweep recorded as a CUDA graph as ours is (--cusparse-graph=false: plain
//               calls), timed with CUDA events over --iterations sweeps after one warm-up
//               sweep; skipped,
//               and said so, when the CSR matrix does not fit the device's free memory;
//   converge    the sweeps until the relative residual falls by less than 1 % in a sweep
//               (at most --converge-iterations), and the relative L2 error against the
//               phantom after --converge-iterations sweeps, ours and cuSPARSE's;
//   on the fly  time to the same error with the on-the-fly projectors instead of a stored
//               matrix: SART (720 blocks) and OS-SART (90 interleaved blocks, as many as
//               ours) of core/algorithms/block_iterative.h on CudaBackend, non-negative,
//               --on-the-fly-relaxation (1), same data: the first iteration whose error
//               against the phantom is at most the best ours reaches within
//               --converge-iterations sweeps (or their best), and seconds per iteration
//               (difference of 2 and 2 + --iterations runs); time to that error =
//               iterations x seconds, ours = the sweep of its best error x its seconds;
//   floor       the HBM-traffic floor per iteration at --hbm-tbps (3.35 for an H100 SXM):
//               ours reads the stored matrix at least once (its 90 per-block passes read
//               each stored view's rows for the forward and again for the transposed
//               pass, the second mostly from L2) plus x (read twice, written once) per
//               block; cuSPARSE reads the whole CSR matrix twice (SpMV and its transpose)
//               plus x about five times per block.
//
// A size whose matrix (twice, as the device build and the upload hold it) and vectors do not
// fit the device's free memory is skipped, and said so.
//
//   build/bin/system-matrix-bench --sizes 512,1024,2048 --kernel all --json system_matrix.json
#include <cuda_runtime.h>
#include <cusparse.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "bench/system_matrix_bench_kernels.h"
#include "core/base/parallel_for.h"
#include "core/base/run_context.h"
#include "core/base/status_macros.h"
#include "core/algorithms/block_iterative.h"
#include "core/devices/devices.h"
#include "core/geometry/geometry_builders.h"
#include "core/phantom/ellipsoid_phantom.h"
#include "core/system_matrix/cuda/device_matrix_build.h"
#include "core/system_matrix/cuda/device_stored_matrix.h"
#include "core/system_matrix/matrix_memory.h"
#include "core/system_matrix/symmetric_system_matrix.h"
#include "core/system_matrix/view_blocks.h"

namespace tomo::bench {
namespace {

using core::Array3D;
using core::ProgressUpdate;
using core::RunContext;
using namespace core::system_matrix;

constexpr double kFieldMm = 256;
constexpr double kSourceOriginMm = 570;
constexpr double kOriginDetectorMm = 470;
constexpr double kColumnSpacingMm = 0.69;
constexpr double kPhantomRadiusMm = 120;

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

#define BENCH_CUDA(expr)                                                              \
  do {                                                                                \
    const cudaError_t e_ = (expr);                                                    \
    if (e_ != cudaSuccess) {                                                          \
      return absl::InternalError(absl::StrCat(#expr, ": ", cudaGetErrorString(e_))); \
    }                                                                                 \
  } while (false)
#define BENCH_CUSPARSE(expr)                                                               \
  do {                                                                                     \
    const cusparseStatus_t e_ = (expr);                                                    \
    if (e_ != CUSPARSE_STATUS_SUCCESS) {                                                   \
      return absl::InternalError(absl::StrCat(#expr, ": ", cusparseGetErrorString(e_)));   \
    }                                                                                      \
  } while (false)

double RelativeL2(const float* a, const float* b, int64_t count) {
  double diff = 0, norm = 0;
  for (int64_t i = 0; i < count; ++i) {
    diff += std::pow(static_cast<double>(a[i]) - b[i], 2);
    norm += std::pow(static_cast<double>(b[i]), 2);
  }
  return std::sqrt(diff / norm);
}

struct Options {
  std::vector<int64_t> sizes = {512, 1024, 2048};
  int64_t views = 720;
  int64_t columns = 1024;
  // 40: the sweep's seconds are the difference of two whole runs, and with 5 sweeps the same
  // build differed by up to 16% between processes (bench/NOTES.md, sixth session of the
  // tiled sweep).
  int iterations = 40;
  int converge_iterations = 20;
  // Block ART at 1.9 reached the 47^2 test phantom's best error in half the sweeps of 1.0
  // (block_art_test's scan: 0.114 after 15 sweeps against 0.113 after 30).
  double relaxation = 1.9;
  double on_the_fly_relaxation = 1.0;  // SART / OS-SART: the product's default
  double hbm_tbps = 3.35;
  bool cusparse = true;
  bool on_the_fly = true;
  bool cusparse_graph = true;
  bool cpu_build = true;
  // Print each timed sweep's seconds as the host saw them (RunArt's progress, which follows
  // each sweep's residual back to the host): whether sweeps slow down along a run.
  bool sweep_times = false;
  std::vector<SymmetricKernels> kernels = AllSymmetricKernels();
  std::vector<int> slab_steps = {0};
  // tiled-sweep: the most blocks' slots held in shared memory, one line per value
  // (UploadSymmetricMatrix's most_slot_buffers; 0: read from device memory).
  std::vector<int> slot_buffers = {2};
};

// Whether the variant has slabs (a steps-per-slab setting to vary).
bool HasSlabs(SymmetricKernels k) {
  return k != SymmetricKernels::kGather && k != SymmetricKernels::kOrbit;
}

struct KernelResult {
  SymmetricKernels kernels = kDefaultSymmetricKernels;
  int slab_steps = 0;  // 0: the layout's default
  uint64_t device_bytes = 0;  // the matrix's arrays on the device
  double upload_s = 0, s_per_sweep = 0, forward_s = 0, back_s = 0;
  bool layout_built = false;  // the upload built the tiled layout (later ones reuse it)
  int most_slot_buffers = 2;  // asked of the upload (tiled-sweep)
  int slot_buffers = 0;       // blocks' slots the sweep holds in shared memory (0: none)
  int converged_at = 0;
  double error = 0, best_error = -1, vs_cusparse = -1, vs_first = -1;
  int best_at = 0;
  std::vector<double> sweep_s;  // --sweep-times: the timed run's sweeps, in order
};

std::string VariantName(const KernelResult& k) {
  std::string name = k.slab_steps > 0
                         ? absl::StrCat(SymmetricKernelsName(k.kernels), "/", k.slab_steps)
                         : std::string(SymmetricKernelsName(k.kernels));
  if (k.most_slot_buffers != 2) absl::StrAppend(&name, "/b", k.most_slot_buffers);
  return name;
}

// One kernel variant of ours (DeviceStoredMatrix's SymmetricKernels).
struct Result {
  int64_t n = 0;
  uint64_t csr_bytes = 0, symmetric_bytes = 0;
  int64_t nonzeros = 0, stored_views = 0;
  double count_s = 0, build_s = -1, device_build_s = 0, expand_s = 0;
  std::vector<KernelResult> kernels;  // options.kernels order
  double cusparse_s = -1, cusparse_error = -1;
  double ours_floor_s = 0, cusparse_floor_s = 0;
  struct OnTheFly {
    int64_t blocks = 0;
    int reached_at = -1;  // first iteration at or below ours' error; -1: never
    double best_error = -1, s_per_iteration = -1;
  } sart, os_sart;
  std::string note;
};

// SART / OS-SART with the on-the-fly projectors on the CUDA backend.
absl::Status RunOnTheFly(const core::VectorGeometry& geometry, const core::VolumeGeometry& volume,
                         const Array3D& sinogram, const Array3D& truth, double target_error,
                         const Options& options, Result::OnTheFly& out) {
  const std::vector<core::DeviceInfo> devices = core::ListCudaDevices();
  if (devices.empty()) return absl::FailedPreconditionError("no CUDA device");
  TOMO_ASSIGN_OR_RETURN(std::unique_ptr<core::Backend> backend, core::MakeBackend(devices[0]));
  core::IterativeOptions iterative;
  iterative.relaxation = options.on_the_fly_relaxation;
  iterative.lower_bound = 0;
  iterative.iterations = options.converge_iterations;
  iterative.observe_volume = true;
  iterative.on_iteration = [&](const core::IterationReport& report) {
    const double error = RelativeL2(report.volume->data(), truth.data(), truth.size());
    if (out.best_error < 0 || error < out.best_error) out.best_error = error;
    if (out.reached_at < 0 && error <= target_error) out.reached_at = static_cast<int>(report.iteration);
    return absl::OkStatus();
  };
  TOMO_RETURN_IF_ERROR(core::BlockIterative(geometry, volume, sinogram, iterative, out.blocks,
                                            core::ViewOrder::kInterleaved, *backend, {})
                           .status());
  iterative.observe_volume = false;
  iterative.on_iteration = nullptr;
  iterative.iterations = 2;
  double t = Now();
  TOMO_RETURN_IF_ERROR(core::BlockIterative(geometry, volume, sinogram, iterative, out.blocks,
                                            core::ViewOrder::kInterleaved, *backend, {})
                           .status());
  const double two = Now() - t;
  iterative.iterations = 2 + options.iterations;
  t = Now();
  TOMO_RETURN_IF_ERROR(core::BlockIterative(geometry, volume, sinogram, iterative, out.blocks,
                                            core::ViewOrder::kInterleaved, *backend, {})
                           .status());
  out.s_per_iteration = (Now() - t - two) / options.iterations;
  return absl::OkStatus();
}


// The ART iteration through cuSPARSE on block-ordered CSR (rows of block b: the views of
// orbit b in order, each with all its columns).
class CusparseArt {
 public:
  static absl::StatusOr<std::unique_ptr<CusparseArt>> Create(const SymmetricSystemMatrix& a,
                                                             const Array3D& projections,
                                                             double relaxation, double* expand_s) {
    auto art = std::unique_ptr<CusparseArt>(new CusparseArt());
    const double start = Now();
    const int64_t columns = a.scan().columns();
    const int64_t blocks = a.num_blocks();
    const SymmetricViewBlocks view_blocks(a);
    // Rows in block order: (view, column) of each global row, and lengths.
    std::vector<int64_t> row_view, row_column, block_row_begin{0};
    for (int64_t b = 0; b < blocks; ++b) {
      for (const int64_t v : a.BlockViews(b)) {
        for (int64_t c = 0; c < columns; ++c) {
          row_view.push_back(v);
          row_column.push_back(c);
        }
      }
      block_row_begin.push_back(static_cast<int64_t>(row_view.size()));
    }
    const int64_t rows = static_cast<int64_t>(row_view.size());
    std::vector<int64_t> offsets(static_cast<size_t>(rows) + 1, 0);
    for (int64_t r = 0; r < rows; ++r) {
      const ViewSymmetry& sym = a.symmetry().views[static_cast<size_t>(row_view[r])];
      const int64_t c = row_column[r];
      const int64_t stored = sym.stored * columns + (sym.columns_reversed ? columns - 1 - c : c);
      offsets[r + 1] = offsets[r] + a.row_value_begin()[stored + 1] - a.row_value_begin()[stored];
    }
    std::vector<int32_t> indices(static_cast<size_t>(offsets.back()));
    std::vector<float> values(indices.size());
    std::vector<float> steps(static_cast<size_t>(rows)), b(static_cast<size_t>(rows));
    core::ParallelFor(rows, [&](int64_t r0, int64_t r1) {
      std::vector<int32_t> p;
      std::vector<float> w;
      std::vector<std::pair<int32_t, float>> sorted;
      for (int64_t r = r0; r < r1; ++r) {
        a.RestoreRow(row_view[r], row_column[r], &p, &w);
        sorted.resize(p.size());
        for (size_t e = 0; e < p.size(); ++e) sorted[e] = {p[e], w[e]};
        std::sort(sorted.begin(), sorted.end(),
                  [](const auto& x, const auto& y) { return x.first < y.first; });
        for (size_t e = 0; e < sorted.size(); ++e) {
          indices[offsets[r] + e] = sorted[e].first;
          values[offsets[r] + e] = sorted[e].second;
        }
        b[r] = projections.data()[row_view[r] * columns + row_column[r]];
      }
    });
    for (int64_t blk = 0; blk < blocks; ++blk) {
      const double bound = static_cast<double>(std::max<int64_t>(1, view_blocks.MaxRowsPerPixel(blk)));
      for (int64_t r = block_row_begin[blk]; r < block_row_begin[blk + 1]; ++r) {
        const double norm2 = view_blocks.RowNorm2(row_view[r], row_column[r]);
        steps[r] = norm2 > 1e-20 ? static_cast<float>(relaxation / (bound * norm2)) : 0.0f;
      }
    }
    // Per block 32-bit offsets relative to the block's first entry.
    std::vector<int32_t> block_offsets;
    std::vector<int64_t> block_offsets_begin;
    for (int64_t blk = 0; blk < blocks; ++blk) {
      block_offsets_begin.push_back(static_cast<int64_t>(block_offsets.size()));
      const int64_t first = offsets[block_row_begin[blk]];
      for (int64_t r = block_row_begin[blk]; r <= block_row_begin[blk + 1]; ++r) {
        if (offsets[r] - first > INT32_MAX) return absl::OutOfRangeError("block over 2^31 entries");
        block_offsets.push_back(static_cast<int32_t>(offsets[r] - first));
      }
    }
    *expand_s = Now() - start;
    art->pixels_ = a.scan().nx() * a.scan().ny();
    art->blocks_ = blocks;
    BENCH_CUDA(cudaStreamCreate(&art->stream_));
    BENCH_CUSPARSE(cusparseCreate(&art->handle_));
    BENCH_CUSPARSE(cusparseSetStream(art->handle_, art->stream_));
    auto upload = [&](void** to, const void* from, size_t bytes) -> absl::Status {
      BENCH_CUDA(cudaMalloc(to, std::max<size_t>(bytes, 4)));
      art->allocations_.push_back(*to);
      BENCH_CUDA(cudaMemcpy(*to, from, bytes, cudaMemcpyHostToDevice));
      return absl::OkStatus();
    };
    void *d_indices, *d_values, *d_offsets, *d_b, *d_steps;
    TOMO_RETURN_IF_ERROR(upload(&d_indices, indices.data(), indices.size() * 4));
    TOMO_RETURN_IF_ERROR(upload(&d_values, values.data(), values.size() * 4));
    TOMO_RETURN_IF_ERROR(upload(&d_offsets, block_offsets.data(), block_offsets.size() * 4));
    TOMO_RETURN_IF_ERROR(upload(&d_b, b.data(), b.size() * 4));
    TOMO_RETURN_IF_ERROR(upload(&d_steps, steps.data(), steps.size() * 4));
    art->b_ = static_cast<float*>(d_b);
    art->steps_ = static_cast<float*>(d_steps);
    int64_t most_rows = 0;
    for (int64_t blk = 0; blk < blocks; ++blk) {
      most_rows = std::max(most_rows, block_row_begin[blk + 1] - block_row_begin[blk]);
    }
    void *d_x, *d_y, *d_z;
    std::vector<float> zeros(static_cast<size_t>(std::max(art->pixels_, most_rows)), 0.0f);
    TOMO_RETURN_IF_ERROR(upload(&d_x, zeros.data(), static_cast<size_t>(art->pixels_) * 4));
    TOMO_RETURN_IF_ERROR(upload(&d_y, zeros.data(), static_cast<size_t>(most_rows) * 4));
    TOMO_RETURN_IF_ERROR(upload(&d_z, zeros.data(), static_cast<size_t>(most_rows) * 4));
    art->x_ = static_cast<float*>(d_x);
    art->y_ = static_cast<float*>(d_y);
    art->z_ = static_cast<float*>(d_z);
    BENCH_CUSPARSE(cusparseCreateDnVec(&art->x_vec_, art->pixels_, d_x, CUDA_R_32F));
    size_t buffer_bytes = 0;
    const float one = 1.0f, zero = 0.0f;
    for (int64_t blk = 0; blk < blocks; ++blk) {
      Block block;
      block.first_row = block_row_begin[blk];
      block.rows = block_row_begin[blk + 1] - block_row_begin[blk];
      const int64_t first = offsets[block.first_row];
      const int64_t nnz = offsets[block_row_begin[blk + 1]] - first;
      BENCH_CUSPARSE(cusparseCreateCsr(
          &block.matrix, block.rows, art->pixels_, nnz,
          static_cast<int32_t*>(d_offsets) + block_offsets_begin[blk],
          static_cast<int32_t*>(d_indices) + first, static_cast<float*>(d_values) + first,
          CUSPARSE_INDEX_32I, CUSPARSE_INDEX_32I, CUSPARSE_INDEX_BASE_ZERO, CUDA_R_32F));
      BENCH_CUSPARSE(cusparseCreateDnVec(&block.y, block.rows, d_y, CUDA_R_32F));
      BENCH_CUSPARSE(cusparseCreateDnVec(&block.z, block.rows, d_z, CUDA_R_32F));
      size_t size = 0;
      BENCH_CUSPARSE(cusparseSpMV_bufferSize(art->handle_, CUSPARSE_OPERATION_NON_TRANSPOSE, &one,
                                             block.matrix, art->x_vec_, &zero, block.y, CUDA_R_32F,
                                             CUSPARSE_SPMV_ALG_DEFAULT, &size));
      buffer_bytes = std::max(buffer_bytes, size);
      BENCH_CUSPARSE(cusparseSpMV_bufferSize(art->handle_, CUSPARSE_OPERATION_TRANSPOSE, &one,
                                             block.matrix, block.z, &one, art->x_vec_, CUDA_R_32F,
                                             CUSPARSE_SPMV_ALG_DEFAULT, &size));
      buffer_bytes = std::max(buffer_bytes, size);
      art->block_list_.push_back(block);
    }
    BENCH_CUDA(cudaMalloc(&art->buffer_, std::max<size_t>(buffer_bytes, 4)));
    art->matrix_bytes_ = indices.size() * 4 + values.size() * 4 + block_offsets.size() * 4;
    return art;
  }

  ~CusparseArt() {
    if (graph_exec_ != nullptr) cudaGraphExecDestroy(graph_exec_);
    if (graph_ != nullptr) cudaGraphDestroy(graph_);
    for (Block& b : block_list_) {
      cusparseDestroySpMat(b.matrix);
      cusparseDestroyDnVec(b.y);
      cusparseDestroyDnVec(b.z);
    }
    if (x_vec_ != nullptr) cusparseDestroyDnVec(x_vec_);
    if (handle_ != nullptr) cusparseDestroy(handle_);
    for (void* p : allocations_) cudaFree(p);
    if (buffer_ != nullptr) cudaFree(buffer_);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }

  absl::Status Reset() {
    BENCH_CUDA(cudaMemsetAsync(x_, 0, static_cast<size_t>(pixels_) * 4, stream_));
    return absl::OkStatus();
  }

  absl::Status Sweep() {
    const float one = 1.0f, zero = 0.0f;
    for (const Block& b : block_list_) {
      BENCH_CUSPARSE(cusparseSpMV(handle_, CUSPARSE_OPERATION_NON_TRANSPOSE, &one, b.matrix, x_vec_,
                                  &zero, b.y, CUDA_R_32F, CUSPARSE_SPMV_ALG_DEFAULT, buffer_));
      BENCH_CUDA(LaunchScaledResidual(b_ + b.first_row, y_, steps_ + b.first_row, z_, b.rows,
                                      stream_));
      BENCH_CUSPARSE(cusparseSpMV(handle_, CUSPARSE_OPERATION_TRANSPOSE, &one, b.matrix, b.z, &one,
                                  x_vec_, CUDA_R_32F, CUSPARSE_SPMV_ALG_DEFAULT, buffer_));
      BENCH_CUDA(LaunchClampNonnegative(x_, pixels_, stream_));
    }
    return absl::OkStatus();
  }

  // Records one sweep as a CUDA graph (as ours does), replayed by Replay(); the convergence
  // run goes through it too, so its image checks the replay.
  absl::Status Record() {
    BENCH_CUDA(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
    const absl::Status swept = Sweep();
    const cudaError_t ended = cudaStreamEndCapture(stream_, &graph_);
    TOMO_RETURN_IF_ERROR(swept);
    BENCH_CUDA(ended);
    if (const cudaError_t e = cudaGraphInstantiate(&graph_exec_, graph_, 0); e != cudaSuccess) {
      graph_exec_ = nullptr;
      return absl::InternalError(absl::StrCat("cudaGraphInstantiate: ", cudaGetErrorString(e)));
    }
    return absl::OkStatus();
  }
  absl::Status Replay() {
    if (graph_exec_ == nullptr) return Sweep();
    BENCH_CUDA(cudaGraphLaunch(graph_exec_, stream_));
    return absl::OkStatus();
  }

  absl::Status Download(float* x) {
    BENCH_CUDA(cudaMemcpyAsync(x, x_, static_cast<size_t>(pixels_) * 4, cudaMemcpyDeviceToHost,
                               stream_));
    BENCH_CUDA(cudaStreamSynchronize(stream_));
    return absl::OkStatus();
  }

  cudaStream_t stream() const { return stream_; }
  uint64_t matrix_bytes() const { return matrix_bytes_; }

 private:
  struct Block {
    int64_t first_row = 0, rows = 0;
    cusparseSpMatDescr_t matrix = nullptr;
    cusparseDnVecDescr_t y = nullptr, z = nullptr;
  };
  CusparseArt() = default;
  cudaStream_t stream_ = nullptr;
  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t graph_exec_ = nullptr;
  cusparseHandle_t handle_ = nullptr;
  std::vector<void*> allocations_;
  void* buffer_ = nullptr;
  cusparseDnVecDescr_t x_vec_ = nullptr;
  std::vector<Block> block_list_;
  float *x_ = nullptr, *y_ = nullptr, *z_ = nullptr, *b_ = nullptr, *steps_ = nullptr;
  int64_t pixels_ = 0, blocks_ = 0;
  uint64_t matrix_bytes_ = 0;
};

// The size's line and our kernels' lines, printed before cuSPARSE runs (so that a run cut
// short still shows them); then PrintRest.
void PrintOurs(const Result& r) {
  std::printf("%6ld %8.3f %8.3f %6.2f %8.2f %8.2f %9.3f\n", static_cast<long>(r.n),
              r.csr_bytes / 1e9, r.symmetric_bytes / 1e9,
              static_cast<double>(r.csr_bytes) / r.symmetric_bytes, r.build_s, r.device_build_s,
              r.ours_floor_s * 1e3);
  for (const KernelResult& k : r.kernels) {
    std::printf(
        "       %-13s dev %.3f GB (%.2fx, up %.2f s%s%s)  sweep %.3f ms (A %.3f + A^T %.3f ms "
        "alone)"
        "  x floor %.1f  conv %d  err %.4f  best %.4f@%d  vs first %.1e\n",
        VariantName(k).c_str(), k.device_bytes / 1e9,
        static_cast<double>(r.csr_bytes) / static_cast<double>(k.device_bytes), k.upload_s,
        k.layout_built ? ", layout built" : "",
        k.slot_buffers > 0 ? absl::StrCat(", slots in shared memory x", k.slot_buffers).c_str()
                           : "",
        k.s_per_sweep * 1e3, k.forward_s * 1e3, k.back_s * 1e3, k.s_per_sweep / r.ours_floor_s,
        k.converged_at, k.error, k.best_error, k.best_at, k.vs_first);
    if (!k.sweep_s.empty()) {  // the first interval also holds the run's setup
      std::printf("       sweeps (ms):");
      for (const double s : k.sweep_s) std::printf(" %.3f", s * 1e3);
      std::printf("\n");
    }
  }
  std::fflush(stdout);
}

// Ours with one kernel variant: upload, the error and convergence columns, seconds per
// sweep (difference of 2 and 2 + --iterations sweeps), and the whole products A x and A^T y
// alone (all 90 blocks, CUDA events, after one warm-up), which split the sweep's time.
absl::Status RunOurs(const SymmetricSystemMatrix& a, const Array3D& sinogram,
                     const Array3D& truth, const Options& options, KernelResult& k,
                     std::vector<Array3D>& images) {
  const uint64_t layouts_before = a.tiled_layout_bytes();
  double t = Now();
  TOMO_ASSIGN_OR_RETURN(std::unique_ptr<DeviceStoredMatrix> device,
                        UploadSymmetricMatrix(a, 0, k.kernels, k.slab_steps, k.most_slot_buffers));
  k.upload_s = Now() - t;
  k.slot_buffers = device->sweep_slot_buffers();
  k.layout_built = a.tiled_layout_bytes() > layouts_before;
  k.device_bytes = device->matrix_bytes();
  ArtOptions art;
  art.relaxation = options.relaxation;
  art.iterations = options.converge_iterations;
  art.on_sweep = [&](int64_t sweep, const Array3D& image) {
    const double error = RelativeL2(image.data(), truth.data(), truth.size());
    if (k.best_error < 0 || error < k.best_error) {
      k.best_error = error;
      k.best_at = static_cast<int>(sweep);
    }
    return absl::OkStatus();
  };
  TOMO_ASSIGN_OR_RETURN(ArtResult converged, device->RunArt(sinogram, art, {}));
  art.on_sweep = nullptr;
  k.error = RelativeL2(converged.image.data(), truth.data(), truth.size());
  k.converged_at = static_cast<int>(converged.relative_residuals.size());
  for (size_t i = 1; i < converged.relative_residuals.size(); ++i) {
    const double before = converged.relative_residuals[i - 1];
    if (before - converged.relative_residuals[i] < 0.01 * before) {
      k.converged_at = static_cast<int>(i + 1);
      break;
    }
  }
  images.push_back(std::move(converged.image));
  art.iterations = 2;
  t = Now();
  TOMO_RETURN_IF_ERROR(device->RunArt(sinogram, art, {}).status());
  const double two = Now() - t;
  art.iterations = 2 + options.iterations;
  RunContext timed;
  double last_progress = 0;
  if (options.sweep_times) {
    timed.on_progress = [&](const ProgressUpdate&) {
      const double now = Now();
      k.sweep_s.push_back(now - last_progress);
      last_progress = now;
    };
  }
  t = Now();
  last_progress = t;
  TOMO_RETURN_IF_ERROR(device->RunArt(sinogram, art, timed).status());
  k.s_per_sweep = (Now() - t - two) / options.iterations;

  // The products alone, on device arrays.
  const int64_t pixels = a.scan().nx() * a.scan().ny();
  const int64_t rows = a.scan().rows();
  std::vector<int64_t> all(static_cast<size_t>(a.scan().num_views()));
  for (size_t v = 0; v < all.size(); ++v) all[v] = static_cast<int64_t>(v);
  float *x = nullptr, *y = nullptr;
  BENCH_CUDA(cudaMalloc(&x, static_cast<size_t>(pixels) * 4));
  BENCH_CUDA(cudaMalloc(&y, static_cast<size_t>(rows) * 4));
  const cudaStream_t s = device->stream();
  BENCH_CUDA(cudaMemcpyAsync(x, truth.data(), static_cast<size_t>(pixels) * 4,
                             cudaMemcpyHostToDevice, s));
  BENCH_CUDA(cudaMemcpyAsync(y, sinogram.data(), static_cast<size_t>(rows) * 4,
                             cudaMemcpyHostToDevice, s));
  cudaEvent_t begin, end;
  BENCH_CUDA(cudaEventCreate(&begin));
  BENCH_CUDA(cudaEventCreate(&end));
  for (int pass = 0; pass < 2; ++pass) {
    for (int rep = 0; rep < 2; ++rep) {  // warm-up, then timed
      BENCH_CUDA(cudaEventRecord(begin, s));
      for (int i = 0; i < options.iterations; ++i) {
        TOMO_RETURN_IF_ERROR(pass == 0 ? device->ForwardViewsOnDevice(all, x, y)
                                       : device->BackViewsAddOnDevice(all, y, x));
      }
      BENCH_CUDA(cudaEventRecord(end, s));
      BENCH_CUDA(cudaEventSynchronize(end));
    }
    float ms = 0;
    BENCH_CUDA(cudaEventElapsedTime(&ms, begin, end));
    (pass == 0 ? k.forward_s : k.back_s) = ms / 1e3 / options.iterations;
  }
  cudaEventDestroy(begin);
  cudaEventDestroy(end);
  cudaFree(x);
  cudaFree(y);
  return absl::OkStatus();
}

absl::Status RunSize(int64_t n, const Options& options, Result& result) {
  result.n = n;
  core::FanConeOptions fan;
  fan.detector = {1, options.columns, 1.0, kColumnSpacingMm, 0, 0};
  fan.source_origin_mm = kSourceOriginMm;
  fan.origin_detector_mm = kOriginDetectorMm;
  fan.angles_rad = core::UniformAnglesRad(options.views, M_PI / static_cast<double>(options.views),
                                          2 * M_PI);
  TOMO_ASSIGN_OR_RETURN(core::VectorGeometry geometry, core::MakeFan2D(fan));
  const double pixel = kFieldMm / static_cast<double>(n);
  TOMO_ASSIGN_OR_RETURN(core::VolumeGeometry volume,
                        core::VolumeGeometry::Create({n, n, 1}, {pixel, pixel, pixel}, {}));
  TOMO_ASSIGN_OR_RETURN(FanScan scan, FanScan::Create(geometry, volume));

  double t = Now();
  TOMO_ASSIGN_OR_RETURN(MatrixBytes need, EstimateMatrixBytes(scan, MatrixFormat::kAutomatic));
  result.count_s = Now() - t;
  result.csr_bytes = need.csr_bytes;
  result.symmetric_bytes = need.bytes;
  result.nonzeros = need.nonzeros;
  {
    // The matrix twice (the device build's rows, then the upload; both live at the upload)
    // and the ART vectors, with 1 GiB to spare: otherwise the size is skipped, and said so.
    size_t free_bytes = 0, total_bytes = 0;
    BENCH_CUDA(cudaMemGetInfo(&free_bytes, &total_bytes));
    const uint64_t wanted = 2 * need.bytes + 6 * static_cast<uint64_t>(scan.rows()) * 4 +
                            4 * static_cast<uint64_t>(n * n) * 4 + (uint64_t{1} << 30);
    if (wanted > free_bytes) {
      absl::StrAppend(&result.note, "needs ", wanted / 1e9, " GB of the device's ",
                      free_bytes / 1e9, " GB free: not run");
      return absl::OkStatus();
    }
  }
  t = Now();
  TOMO_ASSIGN_OR_RETURN(SymmetricSystemMatrix a, BuildSymmetricMatrixOnDevice(scan, 0));
  result.device_build_s = Now() - t;
  if (options.cpu_build) {
    t = Now();
    TOMO_ASSIGN_OR_RETURN(SymmetricSystemMatrix cpu_built, SymmetricSystemMatrix::Build(scan));
    result.build_s = Now() - t;
    if (a.row_value_begin() != cpu_built.row_value_begin()) {
      return absl::InternalError("the device build's extents differ from the CPU build's");
    }
  }
  result.stored_views = a.num_blocks();

  const core::EllipsePhantom phantom = core::EllipsePhantom::ModifiedSheppLogan(kPhantomRadiusMm);
  const Array3D truth = phantom.Rasterize(volume, 2);
  const Array3D sinogram = core::EllipsoidPhantom::ExtrudedFrom(phantom).Project(geometry, 2);
  std::vector<Array3D> images;  // each kernel's image after --converge-iterations sweeps
  std::vector<KernelResult> variants;
  for (const SymmetricKernels kernels : options.kernels) {
    for (const int steps : options.slab_steps) {
      if (steps > 0 && !HasSlabs(kernels)) continue;
      for (const int buffers : options.slot_buffers) {
        if (buffers != 2 && kernels != SymmetricKernels::kTiledSweep) continue;
        KernelResult k;
        k.kernels = kernels;
        k.slab_steps = steps;
        k.most_slot_buffers = buffers;
        variants.push_back(k);
      }
    }
    if (!HasSlabs(kernels) && std::find(options.slab_steps.begin(), options.slab_steps.end(), 0) ==
                                  options.slab_steps.end()) {
      KernelResult k;
      k.kernels = kernels;
      variants.push_back(k);
    }
  }
  for (KernelResult k : variants) {
    const size_t images_before = images.size();
    const absl::Status ran = RunOurs(a, sinogram, truth, options, k, images);
    if (!ran.ok()) {  // said, and the other variants still run
      images.resize(images_before);
      std::printf("       %-13s failed: %s\n", VariantName(k).c_str(),
                  std::string(ran.message()).c_str());
      absl::StrAppend(&result.note, VariantName(k), " failed; ");
      continue;
    }
    result.kernels.push_back(k);
  }
  if (result.kernels.empty()) return absl::InternalError("every kernel variant failed");
  // Every variant computes the same iteration: their images agree to float rounding.
  for (size_t i = 1; i < images.size(); ++i) {
    result.kernels[i].vs_first = RelativeL2(images[i].data(), images[0].data(), images[0].size());
  }

  const double bandwidth = options.hbm_tbps * 1e12;
  const double pixels_bytes = 4.0 * static_cast<double>(n * n);
  result.ours_floor_s =
      (static_cast<double>(result.symmetric_bytes) + 3 * pixels_bytes * a.num_blocks()) / bandwidth;
  result.cusparse_floor_s =
      (2.0 * static_cast<double>(result.csr_bytes) + 5 * pixels_bytes * a.num_blocks()) / bandwidth;
  PrintOurs(result);

  if (options.on_the_fly) {
    result.sart.blocks = options.views;
    result.os_sart.blocks = a.num_blocks();
    for (Result::OnTheFly* method : {&result.sart, &result.os_sart}) {
      const absl::Status ran = RunOnTheFly(geometry, volume, sinogram, truth,
                                           result.kernels[0].best_error, options, *method);
      if (!ran.ok()) {
        absl::StrAppend(&result.note, method == &result.sart ? "SART" : "OS-SART", " failed: ",
                        ran.message(), "; ");
        method->s_per_iteration = -1;
      }
    }
  }
  if (!options.cusparse) {
    absl::StrAppend(&result.note, "cuSPARSE skipped (--cusparse=false)");
    return absl::OkStatus();
  }
  size_t free_bytes = 0, total_bytes = 0;
  BENCH_CUDA(cudaMemGetInfo(&free_bytes, &total_bytes));
  // The CSR arrays plus a margin for cuSPARSE's buffer and the vectors.
  if (result.csr_bytes + (uint64_t{2} << 30) > free_bytes) {
    absl::StrAppend(&result.note, "CSR (", result.csr_bytes / 1e9, " GB) does not fit the ",
                    free_bytes / 1e9, " GB free: cuSPARSE not run");
    return absl::OkStatus();
  }
  TOMO_ASSIGN_OR_RETURN(std::unique_ptr<CusparseArt> cusparse,
                        CusparseArt::Create(a, sinogram, options.relaxation, &result.expand_s));
  if (options.cusparse_graph) {
    if (const absl::Status recorded = cusparse->Record(); !recorded.ok()) {
      cudaGetLastError();  // clear it: the sweep then runs as plain calls
      absl::StrAppend(&result.note, "cuSPARSE sweep not recorded as a graph (",
                      recorded.message(), "): plain calls");
    }
  }
  TOMO_RETURN_IF_ERROR(cusparse->Reset());
  for (int i = 0; i < options.converge_iterations; ++i) TOMO_RETURN_IF_ERROR(cusparse->Replay());
  Array3D image({1, n, n});
  TOMO_RETURN_IF_ERROR(cusparse->Download(image.data()));
  result.cusparse_error = RelativeL2(image.data(), truth.data(), truth.size());
  for (size_t i = 0; i < images.size(); ++i) {
    result.kernels[i].vs_cusparse = RelativeL2(images[i].data(), image.data(), image.size());
  }
  cudaEvent_t begin, end;
  BENCH_CUDA(cudaEventCreate(&begin));
  BENCH_CUDA(cudaEventCreate(&end));
  TOMO_RETURN_IF_ERROR(cusparse->Replay());  // warm-up
  BENCH_CUDA(cudaEventRecord(begin, cusparse->stream()));
  for (int i = 0; i < options.iterations; ++i) TOMO_RETURN_IF_ERROR(cusparse->Replay());
  BENCH_CUDA(cudaEventRecord(end, cusparse->stream()));
  BENCH_CUDA(cudaEventSynchronize(end));
  float ms = 0;
  BENCH_CUDA(cudaEventElapsedTime(&ms, begin, end));
  result.cusparse_s = ms / 1e3 / options.iterations;
  cudaEventDestroy(begin);
  cudaEventDestroy(end);
  return absl::OkStatus();
}

std::string OnTheFlyJson(const Result::OnTheFly& f) {
  return absl::StrCat("{\"blocks\": ", f.blocks, ", \"reached_at\": ", f.reached_at,
                      ", \"best_error\": ", f.best_error, ", \"s_per_iteration\": ",
                      f.s_per_iteration, "}");
}

std::string KernelJson(const KernelResult& k) {
  return absl::StrCat(
      "{\"kernel\": \"", VariantName(k), "\", \"device_bytes\": ", k.device_bytes,
      ", \"upload_s\": ", k.upload_s, ", \"layout_built\": ", k.layout_built ? "true" : "false",
      ", \"s_per_iteration\": ", k.s_per_sweep,
      ", \"forward_s\": ", k.forward_s, ", \"back_s\": ", k.back_s,
      ", \"converged_at\": ", k.converged_at, ", \"error\": ", k.error,
      ", \"best_error\": ", k.best_error, ", \"best_at\": ", k.best_at,
      ", \"vs_cusparse\": ", k.vs_cusparse, ", \"vs_first\": ", k.vs_first, "}");
}

std::string Json(const Result& r) {
  std::string kernels;
  for (const KernelResult& k : r.kernels) {
    absl::StrAppend(&kernels, kernels.empty() ? "" : ", ", KernelJson(k));
  }
  return absl::StrCat(
      "{\"n\": ", r.n, ", \"csr_bytes\": ", r.csr_bytes, ", \"symmetric_bytes\": ",
      r.symmetric_bytes, ", \"ratio\": ",
      static_cast<double>(r.csr_bytes) / static_cast<double>(r.symmetric_bytes),
      ", \"nonzeros\": ", r.nonzeros, ", \"stored_views\": ", r.stored_views,
      ", \"count_s\": ", r.count_s, ", \"build_s\": ", r.build_s,
      ", \"device_build_s\": ", r.device_build_s, ", \"expand_s\": ", r.expand_s,
      ", \"kernels\": [", kernels, "], \"cusparse_s_per_iteration\": ", r.cusparse_s,
      ", \"cusparse_error\": ", r.cusparse_error, ", \"ours_floor_s\": ", r.ours_floor_s,
      ", \"cusparse_floor_s\": ", r.cusparse_floor_s,
      ", \"sart\": ", OnTheFlyJson(r.sart), ", \"os_sart\": ", OnTheFlyJson(r.os_sart),
      ", \"note\": \"", absl::StrReplaceAll(r.note, {{"\"", "'"}, {"\\", "/"}}), "\"}");
}

void PrintRest(const Result& r, const Options& options) {
  std::printf("%6ld   cuSPARSE %.3f ms per sweep (expand %.2f s), error %.4f; %s\n",
              static_cast<long>(r.n), r.cusparse_s * 1e3, r.expand_s, r.cusparse_error,
              r.note.c_str());
  for (const KernelResult& k : r.kernels) {
    std::printf("       %-13s speedup over cuSPARSE %.2f  vs cuSPARSE image %.1e\n",
                VariantName(k).c_str(),
                r.cusparse_s > 0 ? r.cusparse_s / k.s_per_sweep : -1.0, k.vs_cusparse);
  }
  if (r.sart.s_per_iteration > 0 && !r.kernels.empty()) {
    const KernelResult& k = r.kernels[0];
    std::printf("       time to error %.4f: ours (%s) %.3f s (%d sweeps x %.5f)", k.best_error,
                VariantName(k).c_str(), k.best_at * k.s_per_sweep, k.best_at,
                k.s_per_sweep);
    for (const auto* f : {&r.sart, &r.os_sart}) {
      std::printf("; %s(%ld blocks) ", f == &r.sart ? "SART" : "OS-SART",
                  static_cast<long>(f->blocks));
      if (f->reached_at > 0) {
        std::printf("%.3f s (%d x %.5f)", f->reached_at * f->s_per_iteration, f->reached_at,
                    f->s_per_iteration);
      } else {
        std::printf("not reached in %d (best %.4f, %.5f s/it)", options.converge_iterations,
                    f->best_error, f->s_per_iteration);
      }
    }
    std::printf("\n");
  }
  std::fflush(stdout);
}

}  // namespace
}  // namespace tomo::bench

int main(int argc, char** argv) {
  using namespace tomo::bench;
  CLI::App app{"system-matrix-bench: ART on the stored fan-beam system matrix vs cuSPARSE"};
  Options options;
  std::string sizes_text = "512,1024,2048";
  std::string json_path;
  app.add_option("--sizes", sizes_text, "comma-separated grid sides");
  app.add_option("--views", options.views, "views over 2 pi");
  app.add_option("--columns", options.columns, "detector columns");
  app.add_option("--iterations", options.iterations, "timed sweeps");
  app.add_option("--converge-iterations", options.converge_iterations,
                 "sweeps for the error and convergence columns");
  app.add_option("--relaxation", options.relaxation, "lambda of ART on the stored matrix");
  app.add_option("--on-the-fly-relaxation", options.on_the_fly_relaxation,
                 "lambda of SART and OS-SART");
  app.add_option("--hbm-tbps", options.hbm_tbps, "device memory bandwidth for the floor");
  app.add_option("--cusparse", options.cusparse, "run the cuSPARSE reference");
  app.add_option("--on-the-fly", options.on_the_fly, "run SART and OS-SART on the fly");
  app.add_option("--cusparse-graph", options.cusparse_graph,
                 "replay the cuSPARSE sweep as a CUDA graph (as ours)");
  app.add_option("--json", json_path, "write the results as JSON lines to this path");
  app.add_option("--sweep-times", options.sweep_times,
                 "print each timed sweep's milliseconds (host clock, one line per kernel)");
  app.add_option("--cpu-build", options.cpu_build,
                 "also build the matrix on the CPU and check the device build's extents");
  std::string kernels_text = "all";
  std::string steps_text = "0";
  app.add_option("--slab-steps", steps_text,
                 "steps per slab the blocked layouts aim at, comma-separated (0: their default); "
                 "each value is one more line per blocked variant");
  std::string slot_buffers_text = "2";
  app.add_option("--slot-buffers", slot_buffers_text,
                 "tiled-sweep: the most blocks' slots held in shared memory where they fit (2, "
                 "1, or 0: read from device memory), comma-separated: one line each");
  app.add_option("--kernel", kernels_text,
                 "our kernel variants to run, comma-separated (gather, orbit, ...) or all; the "
                 "first is the one compared with SART and OS-SART");
  CLI11_PARSE(app, argc, argv);
  options.sizes.clear();
  for (const absl::string_view s : absl::StrSplit(sizes_text, ',')) {
    options.sizes.push_back(std::stoll(std::string(s)));
  }
  options.slab_steps.clear();
  for (const absl::string_view s : absl::StrSplit(steps_text, ',')) {
    options.slab_steps.push_back(std::stoi(std::string(s)));
  }
  options.slot_buffers.clear();
  for (const absl::string_view s : absl::StrSplit(slot_buffers_text, ',')) {
    if (s != "0" && s != "1" && s != "2") {
      std::fprintf(stderr, "--slot-buffers: '%s' is not 0, 1 or 2\n", std::string(s).c_str());
      return 2;
    }
    options.slot_buffers.push_back(std::stoi(std::string(s)));
  }
  if (kernels_text != "all") {
    options.kernels.clear();
    for (const absl::string_view s : absl::StrSplit(kernels_text, ',')) {
      const absl::StatusOr<SymmetricKernels> k = ParseSymmetricKernels(std::string(s));
      if (!k.ok()) {
        std::printf("%s\n", std::string(k.status().message()).c_str());
        return 2;
      }
      options.kernels.push_back(*k);
    }
  }
  std::printf("%6s %8s %8s %6s %8s %8s %9s\n", "n", "csr GB", "sym GB", "ratio", "cpu bld",
              "gpu bld", "floor ms");
  // Make the CUDA context before the first timing (the device build would carry it).
  if (cudaFree(nullptr) != cudaSuccess) {
    std::printf("no usable CUDA device\n");
    return 1;
  }
  std::vector<std::string> lines;
  int failures = 0;
  for (const int64_t n : options.sizes) {
    Result r;
    const absl::Status status = RunSize(n, options, r);
    if (!status.ok()) {
      std::printf("%6ld failed: %s\n", static_cast<long>(n), std::string(status.message()).c_str());
      ++failures;
      continue;
    }
    PrintRest(r, options);
    lines.push_back(Json(r));
  }
  if (!json_path.empty()) {
    std::ofstream out(json_path);
    for (const std::string& line : lines) out << line << "\n";
  }
  return failures == 0 ? 0 : 1;
}
