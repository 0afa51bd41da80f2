#include "core/algorithms/stored_matrix_art.h"

#include <chrono>
#include <memory>
#include <string>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "core/base/status_macros.h"
#include "core/data/dims_check.h"
#include "core/system_matrix/tiled_runs.h"
#if TOMO_HAVE_CUDA
#include "core/system_matrix/cuda/device_stored_matrix.h"
#endif

namespace tomo::core {
namespace {

namespace sm = system_matrix;

class BuildEach final : public StoredMatrixSource {
 public:
  absl::StatusOr<Found> Get(const VectorGeometry& geometry, const VolumeGeometry& volume,
                            sm::MatrixFormat format, uint64_t budget_bytes) override {
    TOMO_ASSIGN_OR_RETURN(sm::StoredMatrix matrix,
                          sm::BuildStoredMatrix(geometry, volume, format, budget_bytes));
    return Found{std::make_shared<const sm::StoredMatrix>(std::move(matrix)), false};
  }
};

// The CUDA device of a backend named "cuda:N"; -1 for any other.
int CudaDeviceOf(const Backend& backend) {
  absl::string_view name = backend.name();
  int device = -1;
  if (absl::ConsumePrefix(&name, "cuda:") && absl::SimpleAtoi(name, &device)) return device;
  return -1;
}

absl::StatusOr<sm::ArtResult> RunOnDevice(const sm::StoredMatrix& matrix, const Array3D& projections,
                                          const sm::ArtOptions& options,
                                          StoredArtKernels kernels, Backend& backend,
                                          const RunContext& context) {
  const int device = CudaDeviceOf(backend);
#if TOMO_HAVE_CUDA
  if (device >= 0) {
    std::unique_ptr<sm::DeviceStoredMatrix> on_device;
    if (matrix.symmetric() != nullptr) {
      // kTiledSweep: the tiled kernels as one launch per sweep where the device allows it
      // (tiled-fixed's launches per block otherwise).
      const sm::SymmetricKernels symmetric_kernels = kernels == StoredArtKernels::kTiled
                                                         ? sm::SymmetricKernels::kTiledSweep
                                                         : sm::kDefaultSymmetricKernels;
      TOMO_ASSIGN_OR_RETURN(on_device, sm::UploadSymmetricMatrix(*matrix.symmetric(), device,
                                                                 symmetric_kernels));
    } else {
      TOMO_ASSIGN_OR_RETURN(on_device,
                            sm::UploadCsrMatrix(*matrix.csr(), options.views_per_block, device));
    }
    return on_device->RunArt(projections, options, context);
  }
#else
  (void)device;
  (void)kernels;
#endif
  return sm::RunStoredArt(matrix, projections, options, context);
}

// The tiled kernels hold their own layout on the device, not the runs that the budget was
// checked with: the layout is built here (the upload finds it kept with the matrix, as
// later jobs of the same scan do) and checked too.
absl::Status CheckTiledLayoutFits(const sm::SymmetricSystemMatrix& matrix, uint64_t budget_bytes) {
  TOMO_ASSIGN_OR_RETURN(const std::shared_ptr<const sm::TiledRuns> layout, matrix.TiledLayout());
  if (budget_bytes == 0 || layout->bytes() <= budget_bytes) return absl::OkStatus();
  return absl::ResourceExhaustedError(absl::StrCat(
      "algorithm.art.kernels: ART_KERNELS_TILED needs ", layout->bytes(),
      " bytes of device memory for its layout, more than the budget of ", budget_bytes,
      " bytes (ART_KERNELS_ORBIT needs ", matrix.bytes(), ")"));
}

class StoredMatrixArt final : public Algorithm {
 public:
  explicit StoredMatrixArt(std::shared_ptr<StoredMatrixSource> source)
      : source_(std::move(source)) {}

  absl::StatusOr<Array3D> Run(const ReconstructionRequest& request, const Array3D& projections,
                              Backend& backend, const RunContext& context) const override {
    const auto* options = std::get_if<StoredArtOptions>(&request.algorithm);
    if (options == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(
          "algorithm: art was given the options of ", AlgorithmName(request.algorithm)));
    }
    const auto* geometry = std::get_if<VectorGeometry>(&request.geometry);
    if (geometry == nullptr) {
      return UnsupportedGeometryKind("algorithm art", request.geometry, "2D fan beams");
    }
    TOMO_RETURN_IF_ERROR(CheckDimsMatch("projections", projections.dims(),
                                        geometry->projection_dims(), "(views, rows, columns)"));
    TOMO_RETURN_IF_ERROR(context.CheckCancelled("art / matrix"));
    const auto start = std::chrono::steady_clock::now();
    TOMO_ASSIGN_OR_RETURN(StoredMatrixSource::Found found,
                          source_->Get(*geometry, request.volume, options->format,
                                       context.memory_budget_bytes));
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const sm::StoredMatrix& matrix = *found.matrix;
    // A kept matrix was built under another job's budget.
    TOMO_RETURN_IF_ERROR(sm::CheckMatrixFitsBudget(matrix.counted(), context.memory_budget_bytes));
    TOMO_RETURN_IF_ERROR(sm::ValidateArtOptions(
        options->art, matrix.format() == sm::MatrixFormat::kSymmetric, geometry->num_views()));
    // The kernels matter only for the symmetric format on a CUDA device.
    const bool device_kernels = matrix.symmetric() != nullptr && CudaDeviceOf(backend) >= 0;
    if (device_kernels && options->kernels == StoredArtKernels::kTiled) {
      TOMO_RETURN_IF_ERROR(CheckTiledLayoutFits(*matrix.symmetric(), context.memory_budget_bytes));
    }
    ProgressUpdate chosen;
    chosen.stage = absl::StrFormat(
        "art: %s format (%s), %d bytes (CSR: %d), %s%s", sm::MatrixFormatName(matrix.format()),
        matrix.symmetry(), matrix.bytes(), matrix.counted().csr_bytes,
        found.reused ? std::string("reused from an earlier job")
                     : absl::StrFormat("built in %.3f s", seconds),
        !device_kernels ? ""
        : options->kernels == StoredArtKernels::kTiled ? ", tiled kernels"
                                                        : ", orbit kernels");
    context.Report(chosen);
    TOMO_ASSIGN_OR_RETURN(sm::ArtResult result, RunOnDevice(matrix, projections, options->art,
                                                            options->kernels, backend, context));
    return std::move(result.image);
  }

  uint64_t MinimumDeviceBytes(const ReconstructionRequest& request) const override {
    const auto* options = std::get_if<StoredArtOptions>(&request.algorithm);
    const auto* geometry = std::get_if<VectorGeometry>(&request.geometry);
    if (options == nullptr || geometry == nullptr) return 0;
    absl::StatusOr<sm::MatrixBytes> need =
        sm::EstimateMatrixBytes(*geometry, request.volume, options->format);
    return need.ok() ? need->bytes : 0;
  }

  // On a CUDA device the tiled kernels hold their layout of the symmetric matrix, not the
  // runs format: its bytes, counted without building either (a scan without the symmetry
  // falls back to CSR, whose bytes MinimumDeviceBytes counts).
  uint64_t MinimumDeviceBytesOn(const ReconstructionRequest& request,
                                DeviceKind kind) const override {
    const auto* options = std::get_if<StoredArtOptions>(&request.algorithm);
    const auto* geometry = std::get_if<VectorGeometry>(&request.geometry);
    if (kind == DeviceKind::kCuda && options != nullptr && geometry != nullptr &&
        options->kernels == StoredArtKernels::kTiled && options->format != sm::MatrixFormat::kCsr) {
      const absl::StatusOr<uint64_t> layout = source_->TiledLayoutBytes(*geometry, request.volume);
      if (layout.ok()) return *layout;
    }
    return MinimumDeviceBytes(request);
  }

 private:
  std::shared_ptr<StoredMatrixSource> source_;
};

}  // namespace

absl::StatusOr<uint64_t> StoredMatrixSource::TiledLayoutBytes(const VectorGeometry& geometry,
                                                              const VolumeGeometry& volume) {
  TOMO_ASSIGN_OR_RETURN(const sm::FanScan scan, sm::FanScan::Create(geometry, volume));
  return sm::TiledRuns::CountBytes(scan, 0);
}

std::shared_ptr<StoredMatrixSource> BuildEveryMatrix() { return std::make_shared<BuildEach>(); }

std::unique_ptr<Algorithm> MakeStoredMatrixArtAlgorithm(std::shared_ptr<StoredMatrixSource> source) {
  return std::make_unique<StoredMatrixArt>(source ? std::move(source) : BuildEveryMatrix());
}

}  // namespace tomo::core
