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
// 7 GB/s on an H100 machine). While the device computes the last chunks, the host thread
// maps the result's pages (core/base/page_touch.h) so that the download's copies into it
// do not fault; the gathers and those copies use streaming stores
// (core/base/streaming_copy.h). Finish can write into any caller's memory (FinishInto):
// with several devices each writes its z-slab straight into the one result.
//
// Projections that are already page-locked (an input tomod read ahead and registered,
// core::PinHostMemory; IsPageLocked tells) skip the gathering: with `staging`, a chunk whose
// first views arrive page-locked has its band rows copied straight from the caller's
// memory into the device buffer (cudaMemcpy2DAsync, or one cudaMemcpyAsync when the band is
// the whole view), piece by piece as AddViews delivers them, on the same copy stream with
// the same events, and is launched when full: the same chunks, so the volume is the same
// bit for bit as from pageable projections. (Without staging every piece goes up straight
// from the caller's memory anyway, page-locked or not.)
//
//   page-locked:    copy stream:    [views 0 -> device 0][views 1 -> device 1][views 2 ...
//                   compute stream:                      [filter+BP 0]        [filter+BP 1]
//
// The volume's download overlaps the back projection: with staging, float16 texels (FDK)
// and enough slices, the volume is cut along z into a head and a few tail sub-slabs. The
// chunks are back projected into the head as they arrive and also kept on the device,
// filtered, in float16 (the band of every view: the memory the slab plan counts for the
// projections); after the last chunk the device back projects them into each tail
// sub-slab in turn, while the copy stream downloads each finished sub-slab and the host
// threads empty the staging buffers into the result. The head is about the share of the
// volume the device back projects while the projections arrive (so it does not wait for
// them); only the last tail sub-slab's download (an eighth of the volume) is left after the
// device is done. Each voxel sums the same views in the same order as without sub-slabs;
// only the view vectors, made per sub-slab, differ in their last bits. (CudaBackend's
// stream, fed by an upload slower than the device, asks for none: the device keeps up with
// the whole volume there, and only the download is left after the last view.)
//
//   compute stream: [chunks -> head][kept views -> tail 1][kept views -> tail 2] ...
//   copy stream:                    [head -> host]        [tail 1 -> host] ...
//
// The caller holds the device current (ScopedDevice) and has checked the operands.
// Pixel weights that differ between views are the caller's to apply (this path keeps one
// rows x columns map on the device).
#pragma once

#include <cuda_runtime.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "core/data/array3d.h"
#include "core/filters/ramp_filter.h"
#include "core/geometry/vector_geometry.h"
#include "core/geometry/volume_geometry.h"
#include "core/operators/backend.h"
#include "core/geometry/detector_row_band.h"
#include "core/operators/cuda/cuda_resources.h"
#include "core/operators/cuda/cuda_row_filter.h"
#include "core/operators/cuda/cuda_vector_projector.h"
#include "core/operators/filter_and_back_project_stream.h"
#include "core/operators/filtered_back_projection_weights.h"

namespace tomo::core::cuda {

// Bytes of projections per chunk: large enough that each copy runs at the link's speed and
// each back projection pass covers tens of views (a pass re-reads and re-writes the volume:
// 1 GB per pass at 512^3, a third of a millisecond on an H100), small enough for two
// buffers to be a small part of the device.
constexpr int64_t kFilterAndBackProjectChunkBytes = int64_t{256} << 20;

// Sub-slabs (see above) are cut in eighths of the volume: a head of two to four (tests may
// ask for up to six) and one eighth per tail sub-slab, each eighth at least
// kMinSubSlabSlices slices (fewer slices: one slab, the download after).
constexpr int kSubSlabUnits = 8;
constexpr int64_t kMinSubSlabSlices = 16;
// For Create's head_eighths: choose from the sizes (SubSlabHeadEighths).
constexpr int kHeadEighthsFromSizes = -1;

// Eighths of the volume in the head sub-slab for a band of band_bytes (float views) and
// voxel_views voxel-view updates: about the share the device back projects while the views
// arrive, at least two; 0 (no sub-slabs) when that would be more than half (the arrival,
// not the device, then sets the time).
int SubSlabHeadEighths(int64_t band_bytes, int64_t voxel_views);

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
  // Views uploaded straight from the caller's page-locked memory (the rest were gathered
  // into the staging buffers, or copied from pageable memory without staging).
  int64_t direct_views = 0;
  // Bytes of the result whose pages Finish mapped while the device computed, before its
  // copies reached them (page_touch.h).
  int64_t touched_bytes = 0;
  // Sub-slabs (1: none; else the head and the tail ones). With several, chunks_s ends when
  // the head is done and download_s holds the rest (the tail's back projections too).
  int sub_slabs = 1;
  // The volume came down straight into the result, not through the staging buffers: the
  // call had no staging, or the result lay in a reused block page-locked at Finish
  // (cuda_page_locked_blocks.h).
  bool straight_download = false;
};

// The operator as a stream (filter_and_back_project_stream.h) on one device: set-up at
// Create, then each chunk of views is gathered into a pinned buffer as AddViews delivers it
// and launched (upload on the copy stream, weights, filter and back projection on `stream`)
// once the chunk is full; Finish launches the last one and brings the volume back. Without
// staging each AddViews piece goes up from the caller's memory before AddViews returns.
// With staging, pieces in page-locked memory go up straight into the chunk's device
// buffer (not gathered), also before AddViews returns (it waits for their copies, not for
// the compute); a chunk keeps the way its first piece chose (a later pageable piece of a
// direct chunk is copied from pageable memory, a later page-locked piece of a gathered
// chunk is gathered).
// Each call enters `device`; the owner of `stream` and `staging` must not use them until the
// object is destroyed (the destructor waits for both streams).
class DeviceFilterAndBackProject final : public FilterAndBackProjectStream {
 public:
  // staging: null for pageable copies. chunk_bytes: for tests (many chunks from small data);
  // at least one view per chunk. profile: null, or filled (setup at Create, chunks and
  // download at Finish). head_eighths: for tests, the head's eighths (2 ... 6; 0: no
  // sub-slabs) where sub-slabs are possible; by default chosen from the sizes.
  static absl::StatusOr<std::unique_ptr<DeviceFilterAndBackProject>> Create(
      int device, cudaStream_t stream, const VectorGeometry& geometry,
      const VolumeGeometry& volume_geometry, const RampFilter& filter,
      const FilteredBackProjectionWeights& weights, BackProjectionWeighting weighting,
      PinnedStaging* staging, int64_t chunk_bytes = kFilterAndBackProjectChunkBytes,
      FilterAndBackProjectProfile* profile = nullptr,
      int head_eighths = kHeadEighthsFromSizes);
  ~DeviceFilterAndBackProject() override;

  absl::Status AddViews(int64_t first_view, const float* views, int64_t count) override;
  absl::Status Finish(Array3D& volume) override;
  // As Finish, the volume written to volume_values (the volume geometry's values, z-major):
  // e.g. a z-slab's place in a larger result, so that it is not copied again.
  absl::Status FinishInto(float* volume_values);
  int64_t views_added() const override { return added_; }
  // Views uploaded straight from page-locked memory so far (see the class comment).
  int64_t direct_views() const { return direct_views_; }
  // Views per chunk: AddViews in pieces of this size launch one chunk each.
  int64_t chunk_views() const { return chunk_views_; }

 private:
  DeviceFilterAndBackProject() = default;
  absl::Status AddViewsOnDevice(const float* views, int64_t count);
  // Uploads count views from source (pinned, band rows only; or the caller's full views)
  // and enqueues their filter and back projection. source null: the chunk's views are in
  // its device buffer already (UploadDirect).
  absl::Status LaunchChunk(const float* source, int64_t count, bool wait_for_upload);
  // Enqueues on the copy stream the copy of count of the caller's full views (their band
  // rows) into the current chunk's device buffer after the filled_ views there.
  absl::Status UploadDirect(const float* views, int64_t count);
  absl::Status FinishOnDevice(float* volume_values);
  // A back projector of the band's views into `volume` (a sub-slab, or the whole).
  absl::StatusOr<DeviceVectorProjector> MakeProjector(const VolumeGeometry& volume) const;
  // Enqueues the back projection of the kept views into the tail sub-slabs (after the
  // chunks, which went into the head), each sub-slab followed by its computed_ event.
  absl::Status BackProjectKeptViews();
  // The volume back through the staging buffers in pieces, each sub-slab's after its
  // computed_ event, on the copy stream; the host's threads empty each piece into place.
  // touched: the bytes of the result mapped from its start (page_touch.h), carried on as
  // the waits map more.
  // Into a page-locked result, sub-slab by sub-slab as each is computed.
  absl::Status DownloadStraight(float* volume_values);
  absl::Status DownloadThroughStaging(float* volume_values, size_t& touched);

  int device_ = 0;
  cudaStream_t stream_ = nullptr;
  PinnedStaging* staging_ = nullptr;
  FilterAndBackProjectProfile* profile_ = nullptr;
  int64_t views_ = 0, rows_ = 0, columns_ = 0;
  BackProjectionWeighting weighting_ = BackProjectionWeighting::kNone;
  RowBand band_;
  int64_t view_values_ = 0;  // band rows x columns
  int64_t chunk_views_ = 0;
  int64_t volume_values_ = 0;
  std::optional<VectorGeometry> band_geometry_;  // the band's rows of every view
  // The sub-slabs (z-slabs of the volume, in order: the head first), or the whole volume;
  // their projectors (the tail's are made at Finish).
  std::vector<VolumeGeometry> sub_slab_volumes_;
  std::vector<DeviceVectorProjector> projectors_;
  std::vector<int64_t> sub_slab_first_value_;  // where each sub-slab starts in volume_
  // The filtered band of every view in float16, kept for the tail sub-slabs (empty with
  // one sub-slab).
  DeviceBuffer<uint16_t> kept_views_;
  VectorSampler sampler_ = VectorSampler::kExact;
  std::optional<DeviceRowFilter> row_filter_;
  DeviceBuffer<float> column_weight_;
  DeviceBuffer<float> volume_;
  Stream copy_stream_;
  std::array<DeviceBuffer<float>, 2> buffers_;
  std::array<Event, 2> uploaded_, consumed_, downloaded_;
  int64_t added_ = 0;        // views added (gathered or uploaded)
  int64_t filled_ = 0;       // views of the current chunk gathered (or copied direct)
  int64_t chunk_ = 0;        // chunks launched
  int64_t chunk_first_ = 0;  // first view of the current chunk
  // The current chunk's views go straight from the caller's memory to its device buffer
  // (chosen by its first piece: page-locked), not through the staging buffer.
  bool chunk_direct_ = false;
  int64_t direct_views_ = 0;
  Event source_read_;  // after the direct copies of an AddViews call: it waits for this
  // Per sub-slab, after its back projection (Finish maps the result's pages until the head's).
  std::vector<Event> computed_;
  absl::Status failed_;      // the first error; every later call returns it
  std::chrono::steady_clock::time_point chunks_start_;
};

// The whole operator at once, on the caller's current device: a DeviceFilterAndBackProject
// fed chunk by chunk. staging: null for pageable copies. chunk_bytes: for tests (many chunks
// from small data); at least one view per chunk. profile: null, or filled.
absl::Status FilterAndBackProjectOnDevice(
    cudaStream_t stream, const VectorGeometry& geometry, const VolumeGeometry& volume_geometry,
    const Array3D& projections, const RampFilter& filter,
    const FilteredBackProjectionWeights& weights, BackProjectionWeighting weighting,
    Array3D& volume, PinnedStaging* staging,
    int64_t chunk_bytes = kFilterAndBackProjectChunkBytes,
    FilterAndBackProjectProfile* profile = nullptr, int head_eighths = kHeadEighthsFromSizes);
// The same into volume_values (volume_geometry.dims() values, z-major; see FinishInto).
// head_eighths: as Create's.
absl::Status FilterAndBackProjectOnDevice(
    cudaStream_t stream, const VectorGeometry& geometry, const VolumeGeometry& volume_geometry,
    const Array3D& projections, const RampFilter& filter,
    const FilteredBackProjectionWeights& weights, BackProjectionWeighting weighting,
    float* volume_values, PinnedStaging* staging,
    int64_t chunk_bytes = kFilterAndBackProjectChunkBytes,
    FilterAndBackProjectProfile* profile = nullptr, int head_eighths = kHeadEighthsFromSizes);

}  // namespace tomo::core::cuda
