#include "core/operators/cpu/cpu_radon_projector.h"

#include <cmath>
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "core/base/parallel_for.h"
#include "core/base/status_macros.h"
#include "core/data/dims_check.h"
#include "core/operators/radon_sample_forms.h"

namespace tomo::core {
namespace {

absl::Status CheckArguments(const RadonGeometry& geometry, const VolumeGeometry& volume_geometry,
                            const Array3D& volume, const Array3D& projections) {
  TOMO_RETURN_IF_ERROR(ValidateRadonGeometry(geometry));
  TOMO_RETURN_IF_ERROR(
      CheckDimsMatch("volume", volume.dims(), volume_geometry.dims(), "(z, y, x)"));
  return CheckDimsMatch("projections", projections.dims(), geometry.projection_dims(),
                        "(directions, 1, samples)");
}

}  // namespace

absl::Status RadonForwardCpu(const RadonGeometry& geometry, const VolumeGeometry& volume_geometry,
                             const Array3D& volume, Array3D& projections, int threads) {
  TOMO_RETURN_IF_ERROR(CheckArguments(geometry, volume_geometry, volume, projections));
  const Dims3 dims = volume.dims();
  const int64_t num_samples = geometry.num_samples;
  const Vec3 h = volume_geometry.voxel_size_mm();
  const double mass_per_sample = h.x * h.y * h.z / geometry.sample_spacing_mm;
  // Sample positions u in [-1, S) touch a sample (k0 = floor(u) or k0 + 1 in [0, S)).
  const double reach = static_cast<double>(num_samples) + 1.0;
  // One direction's row per task: each row has one writer.
  ParallelFor(
      geometry.num_directions(),
      [&](int64_t begin, int64_t end) {
        std::vector<double> row(static_cast<size_t>(num_samples));
        for (int64_t i = begin; i < end; ++i) {
          const RadonSampleForm form = MakeRadonSampleForm(
              geometry, volume_geometry, geometry.directions[static_cast<size_t>(i)]);
          std::fill(row.begin(), row.end(), 0.0);
          const float* value = volume.data();
          for (int64_t iz = 0; iz < dims.d0; ++iz) {
            for (int64_t iy = 0; iy < dims.d1; ++iy) {
              const double line =
                  form.w + form.y * static_cast<double>(iy) + form.z * static_cast<double>(iz);
              for (int64_t ix = 0; ix < dims.d2; ++ix, ++value) {
                // v = u + 1 >= 0 wherever a sample is in reach, so truncation is floor.
                const double v = line + form.x * static_cast<double>(ix) + 1.0;
                if (!(v >= 0.0 && v < reach)) continue;
                const int64_t k = static_cast<int64_t>(v) - 1;
                const double frac = v - static_cast<double>(k + 1);
                const double f = static_cast<double>(*value);
                if (k >= 0) row[static_cast<size_t>(k)] += (1.0 - frac) * f;
                if (k + 1 < num_samples) row[static_cast<size_t>(k + 1)] += frac * f;
              }
            }
          }
          for (int64_t k = 0; k < num_samples; ++k) {
            projections.at(i, 0, k) =
                static_cast<float>(mass_per_sample * row[static_cast<size_t>(k)]);
          }
        }
      },
      threads);
  return absl::OkStatus();
}

absl::Status RadonBackScaledCpu(const RadonGeometry& geometry,
                                const VolumeGeometry& volume_geometry, const Array3D& projections,
                                const std::vector<double>& direction_scales, Array3D& volume,
                                int threads) {
  TOMO_RETURN_IF_ERROR(CheckArguments(geometry, volume_geometry, volume, projections));
  const int64_t num_directions = geometry.num_directions();
  if (static_cast<int64_t>(direction_scales.size()) != num_directions) {
    return absl::InvalidArgumentError(absl::StrCat("direction_scales: ", direction_scales.size(),
                                                   " values for ", num_directions, " directions"));
  }
  for (size_t i = 0; i < direction_scales.size(); ++i) {
    if (!std::isfinite(direction_scales[i])) {
      return absl::InvalidArgumentError(
          absl::StrCat("direction_scales[", i, "]: ", direction_scales[i], " is not finite"));
    }
  }
  const std::vector<RadonSampleForm> forms = MakeRadonSampleForms(geometry, volume_geometry);
  const Dims3 dims = volume.dims();
  const int64_t num_samples = geometry.num_samples;
  const double reach = static_cast<double>(num_samples) + 1.0;  // as in RadonForwardCpu
  ParallelFor(
      dims.d0 * dims.d1,
      [&](int64_t begin, int64_t end) {
        std::vector<double> sums(static_cast<size_t>(dims.d2));
        for (int64_t line_index = begin; line_index < end; ++line_index) {
          const int64_t iz = line_index / dims.d1;
          const int64_t iy = line_index % dims.d1;
          std::fill(sums.begin(), sums.end(), 0.0);
          for (int64_t i = 0; i < num_directions; ++i) {
            const RadonSampleForm& form = forms[static_cast<size_t>(i)];
            const double scale = direction_scales[static_cast<size_t>(i)];
            const float* row = projections.data() + i * num_samples;
            const double line =
                form.w + form.y * static_cast<double>(iy) + form.z * static_cast<double>(iz);
            for (int64_t ix = 0; ix < dims.d2; ++ix) {
              const double v = line + form.x * static_cast<double>(ix) + 1.0;  // as above
              if (!(v >= 0.0 && v < reach)) continue;
              const int64_t k = static_cast<int64_t>(v) - 1;
              const double frac = v - static_cast<double>(k + 1);
              double value = 0;
              if (k >= 0) value += (1.0 - frac) * static_cast<double>(row[k]);
              if (k + 1 < num_samples) value += frac * static_cast<double>(row[k + 1]);
              sums[static_cast<size_t>(ix)] += scale * value;
            }
          }
          float* out = volume.data() + line_index * dims.d2;
          for (int64_t ix = 0; ix < dims.d2; ++ix) {
            out[ix] = static_cast<float>(sums[static_cast<size_t>(ix)]);
          }
        }
      },
      threads);
  return absl::OkStatus();
}

absl::Status RadonBackCpu(const RadonGeometry& geometry, const VolumeGeometry& volume_geometry,
                          const Array3D& projections, Array3D& volume, int threads) {
  const Vec3 h = volume_geometry.voxel_size_mm();
  const double scale = h.x * h.y * h.z / geometry.sample_spacing_mm;
  return RadonBackScaledCpu(geometry, volume_geometry, projections,
                            std::vector<double>(geometry.directions.size(), scale), volume,
                            threads);
}

}  // namespace tomo::core
