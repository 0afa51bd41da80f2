// Helpers for the server tests: a small valid JobSpec, its phantom sinogram as bytes, the
// CRC-32 of bytes, a fresh temporary directory, an algorithm that runs until cancelled and
// one that returns fresh random values.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/algorithms/reconstruction.h"
#include "tomoserve/v1/tomoserve.pb.h"

namespace tomo::server::testing {

// A parallel-beam FBP job: detectors x views, an n x n volume of 1 mm voxels.
tomoserve::v1::JobSpec SmallSpec(uint32_t detectors = 64, uint32_t views = 90, uint32_t n = 64);
// The analytic sinogram of a modified Shepp-Logan phantom for spec's geometry, as
// little-endian float32 bytes (view-row-column).
std::string PhantomSinogramBytes(const tomoserve::v1::JobSpec& spec);
// A circular cone-beam FDK job: views over 360 degrees onto rows x columns pixels of 1 mm,
// source 200 mm before and detector 100 mm past the axis, an n^3 volume of 1 mm voxels;
// float32 little-endian input.
tomoserve::v1::JobSpec SmallConeSpec(uint32_t views = 48, uint32_t rows = 20,
                                     uint32_t columns = 32, uint32_t n = 16);
// The analytic cone-beam projections of the 3D Shepp-Logan phantom (radius 0.4 n mm) for a
// spec with a vector geometry, as little-endian float32 bytes (view-row-column).
std::string PhantomConeProjectionBytes(const tomoserve::v1::JobSpec& spec);
// A 2D fan-beam art job: 72 views over 360 degrees and 95 detectors of 0.7 mm (source 80 mm
// before and detector 40 mm past the axis) onto a 61 x 61 grid of 0.45 mm pixels, 7 sweeps:
// the eight-fold symmetry, so art takes the symmetric format; float32 little-endian input.
tomoserve::v1::JobSpec SmallFanArtSpec();
uint32_t Crc32(const std::string& bytes);
// A new empty directory under the test's temporary directory.
std::string NewTempDir(const std::string& name);
std::string ReadFile(const std::string& path);
// Creates or truncates path with bytes; a failure fails the test.
void WriteFile(const std::string& path, const std::string& bytes);

// Reports progress once (stage "blocking", fraction 0.5, iteration 1 of 2), then waits for
// cancellation (CANCELLED) for at most 30 s (then DEADLINE_EXCEEDED).
class BlockingAlgorithm final : public core::Algorithm {
 public:
  absl::StatusOr<core::Array3D> Run(const core::ReconstructionRequest& request,
                                    const core::Array3D& projections, core::Backend& backend,
                                    const core::RunContext& context) const override;
};

// count uniform values in [-1, 1) drawn from seed: RandomVolumeAlgorithm's volume.
std::vector<float> RandomValues(uint64_t seed, size_t count);

// Returns a volume of RandomValues(seed, voxels), ignoring the projections; calls probe
// first (when set), on the worker's thread while the job is RUNNING.
class RandomVolumeAlgorithm final : public core::Algorithm {
 public:
  RandomVolumeAlgorithm(uint64_t seed, std::function<void()> probe = nullptr)
      : seed_(seed), probe_(std::move(probe)) {}
  absl::StatusOr<core::Array3D> Run(const core::ReconstructionRequest& request,
                                    const core::Array3D& projections, core::Backend& backend,
                                    const core::RunContext& context) const override;

 private:
  uint64_t seed_;
  std::function<void()> probe_;
};

}  // namespace tomo::server::testing
