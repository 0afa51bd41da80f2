#include "client/job_spec_sizes.h"

#include <cstdint>

namespace tomo::client {
namespace {

namespace v1 = ::tomoserve::v1;

uint64_t ViewCount(const v1::Angles& angles) {
  return angles.has_uniform() ? angles.uniform().count()
                              : static_cast<uint64_t>(angles.list().degrees_size());
}

}  // namespace

std::optional<ProjectionDims> ProjectionShape(const v1::Geometry& g) {
  switch (g.kind_case()) {
    case v1::Geometry::kParallel2D:
      return ProjectionDims{ViewCount(g.parallel_2d().angles()), 1,
                            g.parallel_2d().num_detectors()};
    case v1::Geometry::kFan2D:
      return ProjectionDims{ViewCount(g.fan_2d().angles()), 1, g.fan_2d().num_detectors()};
    case v1::Geometry::kParallel3D:
      return ProjectionDims{ViewCount(g.parallel_3d().angles()),
                            g.parallel_3d().detector().rows(),
                            g.parallel_3d().detector().columns()};
    case v1::Geometry::kCone:
      return ProjectionDims{ViewCount(g.cone().angles()), g.cone().detector().rows(),
                            g.cone().detector().columns()};
    case v1::Geometry::kHelical:
      return ProjectionDims{ViewCount(g.helical().cone().angles()),
                            g.helical().cone().detector().rows(),
                            g.helical().cone().detector().columns()};
    case v1::Geometry::kVectors:
      return ProjectionDims{static_cast<uint64_t>(g.vectors().views_size()), g.vectors().rows(),
                            g.vectors().columns()};
    case v1::Geometry::kRadon3D: {
      const v1::Radon3D& r = g.radon_3d();
      const uint64_t directions =
          r.has_uniform_solid_angle() ? r.uniform_solid_angle().count()
          : r.has_equal_linear_angle()
              ? uint64_t{r.equal_linear_angle().n_phi()} * r.equal_linear_angle().n_theta()
              : static_cast<uint64_t>(r.directions_size());
      return ProjectionDims{directions, 1, r.num_samples()};
    }
    case v1::Geometry::kFromInputFiles:
    case v1::Geometry::KIND_NOT_SET:
      break;
  }
  return std::nullopt;
}

uint64_t RawValueBytes(v1::DataEncoding encoding) {
  switch (encoding) {
    case v1::DATA_ENCODING_FLOAT32_LE:
    case v1::DATA_ENCODING_FLOAT32_BE:
      return 4;
    case v1::DATA_ENCODING_UINT16_LE:
    case v1::DATA_ENCODING_UINT16_BE:
      return 2;
    default:
      return 0;
  }
}

bool FillImpliedInputSize(v1::JobSpec* spec) {
  v1::ProjectionInput* input = spec->mutable_input();
  if (input->size_bytes() != 0) return false;
  if (!input->files().empty()) {
    // The listed files' sum (tomod checks each file's size and the sum again).
    uint64_t total = 0;
    for (const v1::InputFile& file : input->files()) {
      if (file.size_bytes() > UINT64_MAX - total) return false;
      total += file.size_bytes();
    }
    input->set_size_bytes(total);
    return total != 0;
  }
  const uint64_t value_bytes = RawValueBytes(input->encoding());
  if (value_bytes == 0) return false;
  const std::optional<ProjectionDims> dims = ProjectionShape(spec->geometry());
  if (!dims) return false;
  // The geometry's counts are at most 2^16 (views 2^20) each: no overflow in 64 bits. tomod
  // refuses what is out of range whatever this says.
  input->set_size_bytes(dims->views * dims->rows * dims->columns * value_bytes);
  return input->size_bytes() != 0;
}

}  // namespace tomo::client
