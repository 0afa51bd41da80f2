// The "art" registry entry: ART on a stored, symmetry-compressed system matrix
// (core/system_matrix/stored_matrix.h, docs/system_matrix.md) for a 2D fan beam.
//
// A run: the matrix comes from a StoredMatrixSource (built each time by default; tomod
// keeps a bounded cache, server/jobs/matrix_cache.h), whose build counts the bytes first
// (EstimateMatrixBytes) and refuses a matrix above context.memory_budget_bytes,
// RESOURCE_EXHAUSTED naming the format and the bytes, before building anything (a kept
// matrix is checked against this job's budget too); MinimumDeviceBytes is the counted
// bytes, and MinimumDeviceBytesOn a CUDA device those of the tiled layout when the job asks
// for the tiled kernels (StoredMatrixSource::TiledLayoutBytes), so tomod refuses such a job
// when it is submitted; a progress event
// says which format was used and why ("art: symmetric format (eight-fold), 123 bytes,
// built in 0.41 s" or "..., reused"); then block ART runs on the backend's device: the CUDA
// path (system_matrix/cuda/device_stored_matrix.h) when the backend is "cuda:N" and the
// build has CUDA, RunStoredArt on the CPU otherwise. One progress event per sweep with its
// relative residual; cancellation between blocks.
//
// Errors: INVALID_ARGUMENT for a geometry that is not a 2D fan beam (naming "art" and the
// kind for a Radon geometry), options ValidateArtOptions refuses; FAILED_PRECONDITION for
// kSymmetric on a scan without the symmetry; RESOURCE_EXHAUSTED; CANCELLED.
//
//   registry.Register("art", MakeStoredMatrixArtAlgorithm(cache));
#pragma once

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "core/algorithms/reconstruction.h"
#include "core/system_matrix/stored_matrix.h"

namespace tomo::core {

// Where the matrices come from.
class StoredMatrixSource {
 public:
  struct Found {
    std::shared_ptr<const system_matrix::StoredMatrix> matrix;
    bool reused = false;  // kept from an earlier job rather than built now
  };
  virtual ~StoredMatrixSource() = default;
  // The matrix of (geometry, volume, format), built with budget_bytes as BuildStoredMatrix's
  // budget when it is not kept; BuildStoredMatrix's errors.
  virtual absl::StatusOr<Found> Get(const VectorGeometry& geometry, const VolumeGeometry& volume,
                                    system_matrix::MatrixFormat format,
                                    uint64_t budget_bytes) = 0;
  // The device bytes of the tiled layout of the scan's symmetric matrix at the default tile
  // side, counted without building anything (TiledRuns::CountBytes; its errors): what a
  // tiled ART job needs on a CUDA device. A source may remember the counts (tomod's cache
  // does: a count takes seconds, and every submitted job asks for it).
  virtual absl::StatusOr<uint64_t> TiledLayoutBytes(const VectorGeometry& geometry,
                                                    const VolumeGeometry& volume);
};

// A source that builds every matrix anew.
std::shared_ptr<StoredMatrixSource> BuildEveryMatrix();

// source null: BuildEveryMatrix().
std::unique_ptr<Algorithm> MakeStoredMatrixArtAlgorithm(
    std::shared_ptr<StoredMatrixSource> source = nullptr);

}  // namespace tomo::core
