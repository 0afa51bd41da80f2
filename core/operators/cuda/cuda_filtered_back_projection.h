// Inside the CUDA backend (host code): Backend::FilterAndBackProject on one device, from host
// arrays, for CudaBackend. Not for users of the core (they go through Backend).
//
// The projections travel once, and only the detector rows the volume projects onto
// (core/geometry/detector_row_band.h): views stream to the device in chunks through two
// buffers on a copy stream while the compute stream weights, ramp-filters (DeviceRowFilter)
// and back projects (DeviceVectorProjector::BackViews, accumulating) the chunk before, so
// the transfer hides the computation; the volume comes back once.
//
//   host threads:   [rows 0 -> pinned A][rows 1 -> pinned B][rows 2 -> pinned A] ...
//   copy stream:                        [A -> device 0]     [B -> device 1]   ...
//   compute stream:                                     [filter+BP 0]     [filter+BP 1] ...
//
// With `staging` (two page-locked buffers the backend keeps between calls), the host
// gathers each chunk's band rows into one with all its cores and the copy engine reads it
// at the link's speed, and the volume comes back through them the same way; without, the
// copies go from and to pageable memory (the driver stages them with one thread, about
// 7 GB/s on the H100 machine).
//
// The caller holds the device current (ScopedDevice) and has checked the operands.
// Pixel weights that differ between views are the caller's to apply (this path keeps one
// rows x columns map on the device).
#pragma once

#include <cuda_runtime.h>

#include <array>
#include <cstdint>

#include "absl/status/status.h"
#include "core/data/array3d.h"
#include "core/filters/ramp_filter.h"
#include "core/geometry/vector_geometry.h"
#include "core/geometry/volume_geometry.h"
#include "core/operators/backend.h"
#include "core/operators/cuda/cuda_resources.h"
#include "core/operators/filtered_back_projection_weights.h"

namespace tomo::core::cuda {

// Bytes of projections per chunk: large enough that each copy runs at the link's speed and
// each back projection pass covers tens of views (a pass re-reads and re-writes the volume:
// 1 GB per pass at 512^3, a third of a millisecond on an H100), small enough for two
// buffers to be a small part of the device.
constexpr int64_t kFilterAndBackProjectChunkBytes = int64_t{256} << 20;

// Page-locked chunk buffers, grown on demand and kept between calls by their owner.
struct PinnedStaging {
  std::array<PinnedBuffer<float>, 2> buffers;
};

// Where a call's wall time went, for benchmarks: set-up (buffers, projector, filter plans),
// the chunks (uploads, filters and back projections, until the device is done), the
// volume's download.
struct FilterAndBackProjectProfile {
  double setup_s = 0, chunks_s = 0, download_s = 0;
  int64_t band_rows = 0, chunk_views = 0;
};

// staging: null for pageable copies. chunk_bytes: for tests (many chunks from small data);
// at least one view per chunk. profile: null, or filled.
absl::Status FilterAndBackProjectOnDevice(
    cudaStream_t stream, const VectorGeometry& geometry, const VolumeGeometry& volume_geometry,
    const Array3D& projections, const RampFilter& filter,
    const FilteredBackProjectionWeights& weights, BackProjectionWeighting weighting,
    Array3D& volume, PinnedStaging* staging,
    int64_t chunk_bytes = kFilterAndBackProjectChunkBytes,
    FilterAndBackProjectProfile* profile = nullptr);

}  // namespace tomo::core::cuda
