#include "core/system_matrix/block_art.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"

namespace tomo::core::system_matrix {

bool FinishArtSweep(int64_t sweep, double residual2, double b_norm2, const ArtOptions& options,
                    const RunContext& context, ArtResult& result) {
  const double relative = b_norm2 > 0 ? std::sqrt(residual2 / b_norm2) : 0.0;
  result.relative_residuals.push_back(relative);
  result.iterations_run = sweep;
  ProgressUpdate progress;
  progress.fraction = static_cast<double>(sweep) / static_cast<double>(options.iterations);
  progress.stage = "art";
  progress.iteration = static_cast<uint32_t>(sweep);
  progress.iterations_total = static_cast<uint32_t>(options.iterations);
  progress.relative_residual = relative;
  context.Report(progress);
  return relative < options.stop_relative_residual;
}

absl::StatusOr<ArtResult> RunBlockArt(const ViewBlocks& blocks, const Array3D& projections,
                                      const ArtOptions& options, bool symmetric_format,
                                      const RunContext& context) {
  TOMO_RETURN_IF_ERROR(ValidateArtOptions(options, symmetric_format, blocks.num_views()));
  const Dims3 expected{blocks.num_views(), 1, blocks.columns()};
  if (projections.dims() != expected) {
    return absl::InvalidArgumentError(absl::StrCat(
        "projections: dims (", projections.dims().d0, ", ", projections.dims().d1, ", ",
        projections.dims().d2, ") must be (", expected.d0, ", 1, ", expected.d2, ")"));
  }
  const int64_t columns = blocks.columns();
  const float* b = projections.data();
  double b_norm2 = 0;
  for (int64_t i = 0; i < projections.size(); ++i) b_norm2 += static_cast<double>(b[i]) * b[i];
  ArtResult result;
  result.image = Array3D({1, blocks.ny(), blocks.nx()});
  float* x = result.image.data();
  const int64_t pixels = blocks.nx() * blocks.ny();
  // Per block: lambda / (S_b ||a_i||^2), made once.
  std::vector<std::vector<float>> steps(static_cast<size_t>(blocks.num_blocks()));
  for (int64_t blk = 0; blk < blocks.num_blocks(); ++blk) {
    const std::vector<int64_t>& views = blocks.BlockViews(blk);
    const double bound = static_cast<double>(std::max<int64_t>(1, blocks.MaxRowsPerPixel(blk)));
    std::vector<float>& step = steps[static_cast<size_t>(blk)];
    step.resize(views.size() * static_cast<size_t>(columns));
    for (size_t k = 0; k < views.size(); ++k) {
      for (int64_t c = 0; c < columns; ++c) {
        const double norm2 = blocks.RowNorm2(views[k], c);
        step[k * static_cast<size_t>(columns) + static_cast<size_t>(c)] =
            norm2 > 1e-20 ? static_cast<float>(options.relaxation / (bound * norm2)) : 0.0f;
      }
    }
  }
  std::vector<float> y;
  for (int64_t it = 1; it <= options.iterations; ++it) {
    TOMO_RETURN_IF_ERROR(context.CheckCancelled(absl::StrCat("art / iteration ", it)));
    double residual2 = 0;
    for (int64_t blk = 0; blk < blocks.num_blocks(); ++blk) {
      const std::vector<int64_t>& views = blocks.BlockViews(blk);
      y.resize(views.size() * static_cast<size_t>(columns));
      blocks.ForwardBlock(blk, x, y.data());
      const std::vector<float>& step = steps[static_cast<size_t>(blk)];
      for (size_t k = 0; k < views.size(); ++k) {
        for (int64_t c = 0; c < columns; ++c) {
          const size_t i = k * static_cast<size_t>(columns) + static_cast<size_t>(c);
          const double r = static_cast<double>(b[views[k] * columns + c]) - y[i];
          residual2 += r * r;
          y[i] = static_cast<float>(step[i] * r);
        }
      }
      blocks.BackBlockAdd(blk, y.data(), x);
      if (options.nonnegative) {
        for (int64_t j = 0; j < pixels; ++j) x[j] = std::max(x[j], 0.0f);
      }
    }
    const bool stop = FinishArtSweep(it, residual2, b_norm2, options, context, result);
    if (options.on_sweep) TOMO_RETURN_IF_ERROR(options.on_sweep(it, result.image));
    if (stop) break;
  }
  return result;
}

}  // namespace tomo::core::system_matrix
