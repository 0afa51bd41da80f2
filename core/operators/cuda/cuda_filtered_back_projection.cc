#include "core/operators/cuda/cuda_filtered_back_projection.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/base/page_touch.h"
#include "core/base/parallel_for.h"
#include "core/base/streaming_copy.h"
#include "core/base/status_macros.h"
#include "core/geometry/detector_row_band.h"
#include "core/operators/cuda/cuda_check.h"
#include "core/operators/cuda/cuda_memory_pool.h"
#include "core/operators/cuda/cuda_page_locked_blocks.h"
#include "core/operators/cuda/cuda_resources.h"
#include "core/operators/cuda/cuda_vector_projector.h"

namespace tomo::core::cuda {
namespace {

double SecondsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// Views per chunk: chunk_bytes of float band views, at least one, at most what one pass
// of the layered texture holds.
int64_t ChunkViews(int64_t chunk_bytes, int64_t view_values, int64_t views) {
  return std::clamp<int64_t>(chunk_bytes / (view_values * static_cast<int64_t>(sizeof(float))),
                             1, std::min(views, kMaxTextureLayers));
}

}  // namespace

// Rough rates suffice (a wrong guess costs speed, not correctness): views gathered and
// uploaded at about 12 GB/s (14-15 measured on one device from pageable memory, less when
// devices share the host); about 1e12 voxel-view updates per second. With more than half
// in the head the downloads would only compete with the arrival for the host's memory.
int SubSlabHeadEighths(int64_t band_bytes, int64_t voxel_views) {
  const double upload_s = static_cast<double>(band_bytes) / 12e9;
  const double compute_s = static_cast<double>(voxel_views) / 1e12;
  const double eighths = std::ceil(kSubSlabUnits * upload_s / compute_s);
  if (!(eighths <= kSubSlabUnits / 2)) return 0;
  return static_cast<int>(std::max(eighths, 2.0));
}

absl::StatusOr<std::unique_ptr<DeviceFilterAndBackProject>> DeviceFilterAndBackProject::Create(
    int device, cudaStream_t stream, const VectorGeometry& geometry,
    const VolumeGeometry& volume_geometry, const RampFilter& filter,
    const FilteredBackProjectionWeights& weights, BackProjectionWeighting weighting,
    PinnedStaging* staging, int64_t chunk_bytes, FilterAndBackProjectProfile* profile,
    int head_eighths) {
  const auto start = std::chrono::steady_clock::now();
  if (head_eighths != kHeadEighthsFromSizes &&
      (head_eighths < 0 || head_eighths == 1 || head_eighths > kSubSlabUnits - 2)) {
    return absl::InvalidArgumentError(absl::StrCat("head_eighths: ", head_eighths,
                                                   " is not 0 or in [2, ",
                                                   kSubSlabUnits - 2, "]"));
  }
  TOMO_ASSIGN_OR_RETURN(ScopedDevice scope, ScopedDevice::Enter(device));
  const Dims3 dims = geometry.projection_dims();
  const int64_t views = dims.d0, columns = dims.d2;
  if (filter.num_detectors() != columns) {
    return absl::InvalidArgumentError(absl::StrCat("projections: ", columns,
                                                   " detector columns, but the filter was made "
                                                   "for ",
                                                   filter.num_detectors()));
  }
  TOMO_RETURN_IF_ERROR(weights.Check(dims));
  if (!weights.pixel.empty() && !weights.pixel_shared_by_views(dims)) {
    return absl::InvalidArgumentError(
        "weights.pixel: one map per view; the device path takes one map for every view");
  }
  std::unique_ptr<DeviceFilterAndBackProject> self(new DeviceFilterAndBackProject());
  DeviceFilterAndBackProject& d = *self;
  d.device_ = device;
  d.stream_ = stream;
  d.staging_ = staging;
  d.profile_ = profile;
  d.views_ = views;
  d.rows_ = dims.d1;
  d.columns_ = columns;
  d.weighting_ = weighting;
  d.band_ = DetectorRowBand(geometry, volume_geometry);
  TOMO_ASSIGN_OR_RETURN(VectorGeometry band_geometry, RowBandGeometry(geometry, d.band_));
  std::vector<float> band_pixel_weight;
  if (!weights.pixel.empty()) {
    band_pixel_weight.assign(weights.pixel.begin() + d.band_.first * columns,
                             weights.pixel.begin() + (d.band_.first + d.band_.count) * columns);
  }
  d.view_values_ = d.band_.count * columns;
  d.chunk_views_ = ChunkViews(chunk_bytes, d.view_values_, views);

  d.band_geometry_.emplace(std::move(band_geometry));
  d.sampler_ = DeviceVectorProjector::TextureFitsBack(d.band_.count, columns)
                   ? VectorSampler::kTexture
                   : VectorSampler::kExact;
  d.volume_values_ = volume_geometry.dims().count();
  const int64_t nz = volume_geometry.size().z;
  const int64_t slice_values = d.volume_values_ / nz;
  const int head_units =
      head_eighths != kHeadEighthsFromSizes
          ? head_eighths
          : SubSlabHeadEighths(views * d.view_values_ * static_cast<int64_t>(sizeof(float)),
                               d.volume_values_ * views);
  // (The staged back projector, which reads no texture, is only for one-slice volumes.)
  bool sub_slabs = staging != nullptr && weighting == BackProjectionWeighting::kFdk &&
                   d.sampler_ == VectorSampler::kTexture &&
                   nz >= kSubSlabUnits * kMinSubSlabSlices && head_units > 0;
  if (sub_slabs) {
    // Only when the kept views fit beside everything else with room to spare.
    const int64_t chunk_values = d.chunk_views_ * d.view_values_;
    const uint64_t kept_bytes = static_cast<uint64_t>(views * d.view_values_) * 2;
    const uint64_t other_bytes = static_cast<uint64_t>(d.volume_values_) * 4 +
                                 static_cast<uint64_t>(chunk_values) * (2 * 4 + 2 * 2);
    TOMO_ASSIGN_OR_RETURN(const uint64_t free_bytes, FreeDeviceBytes());
    sub_slabs = kept_bytes + other_bytes <= free_bytes / 5 * 4;
  }
  if (!sub_slabs) {
    d.sub_slab_volumes_.push_back(volume_geometry);
    d.sub_slab_first_value_.push_back(0);
  } else {
    for (int unit = 0; unit < kSubSlabUnits; unit = unit == 0 ? head_units : unit + 1) {
      const int64_t first = nz * unit / kSubSlabUnits;
      const int64_t end = nz * (unit + (unit == 0 ? head_units : 1)) / kSubSlabUnits;
      TOMO_ASSIGN_OR_RETURN(VolumeGeometry part, volume_geometry.Slices(first, end - first));
      d.sub_slab_volumes_.push_back(part);
      d.sub_slab_first_value_.push_back(first * slice_values);
    }
    TOMO_ASSIGN_OR_RETURN(d.kept_views_, DeviceBuffer<uint16_t>::Allocate(
                                             static_cast<size_t>(views * d.view_values_),
                                             stream));
  }
  // The head's (or the whole volume's) projector now; the tail's while the device computes
  // the head (Finish).
  TOMO_ASSIGN_OR_RETURN(DeviceVectorProjector head, d.MakeProjector(d.sub_slab_volumes_[0]));
  d.projectors_.push_back(std::move(head));
  TOMO_ASSIGN_OR_RETURN(DeviceRowFilter row_filter,
                        DeviceRowFilter::Create(filter, d.chunk_views_ * d.band_.count,
                                                d.band_.count, band_pixel_weight, stream));
  d.row_filter_.emplace(std::move(row_filter));
  if (!weights.column.empty()) {
    TOMO_ASSIGN_OR_RETURN(d.column_weight_,
                          DeviceBuffer<float>::Allocate(weights.column.size(), stream));
    TOMO_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(d.column_weight_.get(), weights.column.data(),
                                              d.column_weight_.size_bytes(),
                                              cudaMemcpyHostToDevice, stream));
  }
  TOMO_ASSIGN_OR_RETURN(d.volume_, DeviceBuffer<float>::Allocate(
                                       static_cast<size_t>(d.volume_values_), stream));
  TOMO_ASSIGN_OR_RETURN(d.copy_stream_, Stream::Create());
  TOMO_ASSIGN_OR_RETURN(d.source_read_, Event::Create());
  for (size_t j = 0; j < d.sub_slab_volumes_.size(); ++j) {
    TOMO_ASSIGN_OR_RETURN(Event computed, Event::Create());
    d.computed_.push_back(std::move(computed));
  }
  for (int b = 0; b < 2; ++b) {
    TOMO_ASSIGN_OR_RETURN(d.downloaded_[b], Event::Create());
    TOMO_ASSIGN_OR_RETURN(d.buffers_[b],
                          DeviceBuffer<float>::Allocate(
                              static_cast<size_t>(d.chunk_views_ * d.view_values_),
                              d.copy_stream_.get()));
    TOMO_ASSIGN_OR_RETURN(d.uploaded_[b], Event::Create());
    TOMO_ASSIGN_OR_RETURN(d.consumed_[b], Event::Create());
  }
  const size_t chunk_values = static_cast<size_t>(d.chunk_views_ * d.view_values_);
  if (staging != nullptr) {
    for (PinnedBuffer<float>& pinned : staging->buffers) {
      if (pinned.size() < chunk_values) {
        pinned.Reset();
        TOMO_ASSIGN_OR_RETURN(pinned, PinnedBuffer<float>::Allocate(chunk_values));
      }
    }
  }
  if (profile != nullptr) {
    TOMO_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
    profile->setup_s = SecondsSince(start);
    profile->band_rows = d.band_.count;
    profile->chunk_views = d.chunk_views_;
    d.chunks_start_ = std::chrono::steady_clock::now();
  }
  return self;
}

absl::StatusOr<DeviceVectorProjector> DeviceFilterAndBackProject::MakeProjector(
    const VolumeGeometry& volume) const {
  TOMO_ASSIGN_OR_RETURN(DeviceVectorProjector projector,
                        DeviceVectorProjector::Create(*band_geometry_, volume, stream_));
  // As CudaBackend::BackProject: float16 texels for FDK, its launch shape for 3D volumes.
  const bool fdk = weighting_ == BackProjectionWeighting::kFdk;
  projector.set_back_half(fdk);
  if (fdk && projector.volume_shape().nz > 1) projector.set_back_variant(kBpVariantFdk);
  return projector;
}

DeviceFilterAndBackProject::~DeviceFilterAndBackProject() {
  // Both streams idle before any buffer is released (the buffers are freed in the copy
  // stream's order, but the compute stream reads them), also after an error.
  absl::StatusOr<ScopedDevice> scope = ScopedDevice::Enter(device_);
  if (stream_ != nullptr) cudaStreamSynchronize(stream_);
  if (copy_stream_.get() != nullptr) cudaStreamSynchronize(copy_stream_.get());
  cudaGetLastError();
}

absl::Status DeviceFilterAndBackProject::AddViews(int64_t first_view, const float* views,
                                                  int64_t count) {
  if (!failed_.ok()) return failed_;
  TOMO_RETURN_IF_ERROR(CheckNextViews(first_view, count, added_, views_));
  absl::Status status = AddViewsOnDevice(views, count);
  if (!status.ok()) failed_ = status;
  return status;
}

absl::Status DeviceFilterAndBackProject::AddViewsOnDevice(const float* views, int64_t count) {
  TOMO_ASSIGN_OR_RETURN(ScopedDevice scope, ScopedDevice::Enter(device_));
  const int64_t host_view_values = rows_ * columns_;
  // Page-locked views need no gathering: they go straight to the device (see the header).
  bool page_locked = false;
  if (staging_ != nullptr) {
    TOMO_ASSIGN_OR_RETURN(page_locked,
                          IsPageLocked(views, static_cast<size_t>(count * host_view_values) *
                                                  sizeof(float)));
  }
  bool copied_direct = false;
  while (count > 0) {
    const int64_t take = std::min(count, chunk_views_ - filled_);
    const float* source = views + band_.first * columns_;
    if (staging_ == nullptr) {
      // Pageable: the caller's views go up at once, and are read before this returns.
      TOMO_RETURN_IF_ERROR(LaunchChunk(source, take, /*wait_for_upload=*/true));
    } else {
      const int b = static_cast<int>(chunk_ % 2);
      if (filled_ == 0) chunk_direct_ = page_locked;
      if (chunk_direct_) {
        TOMO_RETURN_IF_ERROR(UploadDirect(views, take));
        copied_direct = true;
        direct_views_ += take;
      } else {
        // Pinned buffer b is free once the copy of chunk - 2 out of it has finished.
        if (filled_ == 0 && chunk_ >= 2) {
          TOMO_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(uploaded_[b].get()));
        }
        float* pinned = staging_->buffers[b].get() + filled_ * view_values_;
        // Streaming stores: the copy engine, not this core, reads the buffer next.
        ParallelFor(take, [&](int64_t first, int64_t end) {
          for (int64_t i = first; i < end; ++i) {
            CopyStreaming(source + i * host_view_values, view_values_,
                          pinned + i * view_values_);
          }
        });
      }
      filled_ += take;
      added_ += take;
      if (filled_ == chunk_views_) {
        TOMO_RETURN_IF_ERROR(LaunchChunk(chunk_direct_ ? nullptr : staging_->buffers[b].get(),
                                         filled_, /*wait_for_upload=*/false));
      }
    }
    views += take * host_view_values;
    count -= take;
  }
  if (copied_direct) {
    // The caller's views are read before this returns (FilterAndBackProjectStream): wait
    // for the copy stream to have read them (and for nothing on the compute stream).
    TOMO_CUDA_RETURN_IF_ERROR(cudaEventRecord(source_read_.get(), copy_stream_.get()));
    TOMO_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(source_read_.get()));
  }
  return absl::OkStatus();
}

absl::Status DeviceFilterAndBackProject::UploadDirect(const float* views, int64_t count) {
  const int b = static_cast<int>(chunk_ % 2);
  const cudaStream_t copy = copy_stream_.get();
  // Device buffer b is free once the compute stream has back projected chunk - 2 (the
  // chunk's first piece waits; the later ones follow it on the copy stream).
  if (filled_ == 0 && chunk_ >= 2) {
    TOMO_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(copy, consumed_[b].get(), 0));
  }
  float* target = buffers_[b].get() + filled_ * view_values_;
  const size_t band_view_bytes = static_cast<size_t>(view_values_) * sizeof(float);
  if (band_.count == rows_) {
    // The band is the whole view: the views are one contiguous range.
    TOMO_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(target, views,
                                              static_cast<size_t>(count) * band_view_bytes,
                                              cudaMemcpyHostToDevice, copy));
  } else {
    TOMO_CUDA_RETURN_IF_ERROR(cudaMemcpy2DAsync(
        target, band_view_bytes, views + band_.first * columns_,
        static_cast<size_t>(rows_ * columns_) * sizeof(float), band_view_bytes,
        static_cast<size_t>(count), cudaMemcpyHostToDevice, copy));
  }
  return absl::OkStatus();
}

absl::Status DeviceFilterAndBackProject::LaunchChunk(const float* source, int64_t count,
                                                     bool wait_for_upload) {
  const int b = static_cast<int>(chunk_ % 2);
  const cudaStream_t copy = copy_stream_.get();
  const size_t band_view_bytes = static_cast<size_t>(view_values_) * sizeof(float);
  const size_t source_pitch = staging_ != nullptr
                                  ? band_view_bytes
                                  : static_cast<size_t>(rows_ * columns_) * sizeof(float);
  if (source != nullptr) {
    // Device buffer b is free once the compute stream has back projected chunk - 2.
    if (chunk_ >= 2) {
      TOMO_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(copy, consumed_[b].get(), 0));
    }
    TOMO_CUDA_RETURN_IF_ERROR(cudaMemcpy2DAsync(buffers_[b].get(), band_view_bytes, source,
                                                source_pitch, band_view_bytes,
                                                static_cast<size_t>(count),
                                                cudaMemcpyHostToDevice, copy));
  }
  // After the chunk's copies (UploadDirect's too, enqueued earlier on the copy stream).
  TOMO_CUDA_RETURN_IF_ERROR(cudaEventRecord(uploaded_[b].get(), copy));
  TOMO_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(stream_, uploaded_[b].get(), 0));
  TOMO_RETURN_IF_ERROR(row_filter_->Apply(
      buffers_[b].get(), buffers_[b].get(),
      column_weight_.get() == nullptr ? nullptr : column_weight_.get() + chunk_first_ * columns_,
      count * band_.count));
  if (kept_views_.get() == nullptr) {
    TOMO_RETURN_IF_ERROR(projectors_.front().BackViews(buffers_[b].get(), chunk_first_, count,
                                                       weighting_, /*accumulate=*/chunk_ > 0,
                                                       volume_.get(), sampler_));
  } else {
    // Kept in float16 for the tail sub-slabs; the head gets them from there too, so that
    // every sub-slab samples the same texels.
    uint16_t* kept = kept_views_.get() + chunk_first_ * view_values_;
    TOMO_CUDA_RETURN_IF_ERROR(
        LaunchFloatToHalf(buffers_[b].get(), count * view_values_, kept, stream_));
    TOMO_RETURN_IF_ERROR(projectors_.front().BackViewsHalf(
        kept, chunk_first_, count, weighting_, /*accumulate=*/chunk_ > 0, volume_.get()));
  }
  TOMO_CUDA_RETURN_IF_ERROR(cudaEventRecord(consumed_[b].get(), stream_));
  if (wait_for_upload) {
    TOMO_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(uploaded_[b].get()));
    added_ += count;
  }
  chunk_first_ += count;
  filled_ = 0;
  ++chunk_;
  return absl::OkStatus();
}

absl::Status DeviceFilterAndBackProject::Finish(Array3D& volume) {
  if (!failed_.ok()) return failed_;
  if (volume.size() != volume_values_) {
    return absl::InvalidArgumentError(absl::StrCat("volume: ", volume.size(), " values, the ",
                                                   "stream's volume has ", volume_values_));
  }
  return FinishInto(volume.data());
}

absl::Status DeviceFilterAndBackProject::FinishInto(float* volume_values) {
  if (!failed_.ok()) return failed_;
  TOMO_RETURN_IF_ERROR(CheckAllViews(added_, views_));
  absl::Status status = FinishOnDevice(volume_values);
  if (!status.ok()) failed_ = status;
  return status;
}

absl::Status DeviceFilterAndBackProject::FinishOnDevice(float* volume_values) {
  TOMO_ASSIGN_OR_RETURN(ScopedDevice scope, ScopedDevice::Enter(device_));
  if (filled_ > 0) {
    TOMO_RETURN_IF_ERROR(LaunchChunk(chunk_direct_ ? nullptr : staging_->buffers[chunk_ % 2].get(),
                                     filled_, /*wait_for_upload=*/false));
  }
  TOMO_RETURN_IF_ERROR(BackProjectKeptViews());
  if (profile_ != nullptr) {
    profile_->direct_views = direct_views_;
    profile_->sub_slabs = static_cast<int>(sub_slab_volumes_.size());
  }
  const size_t volume_bytes = static_cast<size_t>(volume_values_) * sizeof(float);
  size_t touched = 0;
  // Straight into the result: without staging (a plain copy from pageable memory), or when
  // the result lies in a reused large array's block, page-locked here (once per block)
  // while the device computes. Otherwise through the staging buffers.
  bool straight = staging_ == nullptr || PageLockReusedBlock(volume_values, volume_bytes);
  if (!straight) {
    // While the device finishes the head (or only) sub-slab, this thread maps the result's
    // pages (page_touch.h), so the download's copies do not fault them in; it stops as soon
    // as that sub-slab is done (an error stops it too and surfaces at the download's waits).
    touched = TouchPagesWhile(volume_values, volume_bytes, [&] {
      return cudaEventQuery(computed_.front().get()) == cudaErrorNotReady;
    });
  }
  std::chrono::steady_clock::time_point download_start;
  if (profile_ != nullptr) {
    TOMO_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(computed_.front().get()));
    profile_->chunks_s = SecondsSince(chunks_start_);
    download_start = std::chrono::steady_clock::now();
  }
  if (straight) {
    TOMO_RETURN_IF_ERROR(DownloadStraight(volume_values));
  } else {
    TOMO_RETURN_IF_ERROR(DownloadThroughStaging(volume_values, touched));
  }
  if (profile_ != nullptr) {
    profile_->download_s = SecondsSince(download_start);
    profile_->touched_bytes = static_cast<int64_t>(touched);
    profile_->straight_download = straight;
  }
  return absl::OkStatus();
}

absl::Status DeviceFilterAndBackProject::BackProjectKeptViews() {
  TOMO_CUDA_RETURN_IF_ERROR(cudaEventRecord(computed_.front().get(), stream_));
  for (size_t j = 1; j < sub_slab_volumes_.size(); ++j) {
    TOMO_ASSIGN_OR_RETURN(DeviceVectorProjector tail, MakeProjector(sub_slab_volumes_[j]));
    projectors_.push_back(std::move(tail));
    // In the chunks' pieces, so that the texture array stays one chunk deep.
    for (int64_t first = 0; first < views_; first += chunk_views_) {
      const int64_t count = std::min(chunk_views_, views_ - first);
      TOMO_RETURN_IF_ERROR(projectors_[j].BackViewsHalf(
          kept_views_.get() + first * view_values_, first, count, weighting_,
          /*accumulate=*/first > 0, volume_.get() + sub_slab_first_value_[j]));
    }
    TOMO_CUDA_RETURN_IF_ERROR(cudaEventRecord(computed_[j].get(), stream_));
  }
  return absl::OkStatus();
}

absl::Status DeviceFilterAndBackProject::DownloadStraight(float* volume_values) {
  // Each sub-slab as soon as it is computed (on the copy stream, when there is one), so that
  // the head's copy overlaps the tail's back projections.
  const cudaStream_t copy = copy_stream_.get() != nullptr ? copy_stream_.get() : stream_;
  for (size_t j = 0; j < sub_slab_volumes_.size(); ++j) {
    const int64_t first = sub_slab_first_value_[j];
    const int64_t end =
        j + 1 < sub_slab_volumes_.size() ? sub_slab_first_value_[j + 1] : volume_values_;
    TOMO_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(copy, computed_[j].get(), 0));
    TOMO_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(volume_values + first, volume_.get() + first,
                                              static_cast<size_t>(end - first) * sizeof(float),
                                              cudaMemcpyDeviceToHost, copy));
  }
  TOMO_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(copy));
  TOMO_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  return absl::OkStatus();
}

absl::Status DeviceFilterAndBackProject::DownloadThroughStaging(float* volume_values,
                                                                 size_t& touched) {
  // In pieces through the two pinned buffers: the copy engine fills one while the host's
  // threads empty the other into the (pageable) result. A pageable download goes at about
  // 7 GB/s, 0.6 s for a 1024^3 volume. Pieces do not cross sub-slabs: each waits for its
  // own, so the head's pieces come down while the device computes the tail. While a piece
  // is not down yet (its sub-slab still computing), the host's threads map the pages of
  // the result not yet written, from that piece on: the tail's copies, above all the last
  // one after the device is done, then find them mapped.
  struct Piece {
    int64_t first = 0, size = 0;
    size_t sub_slab = 0;
  };
  std::vector<Piece> pieces;
  const int64_t most = chunk_views_ * view_values_;  // the pinned buffers' size
  for (size_t j = 0; j < sub_slab_volumes_.size(); ++j) {
    const int64_t end =
        j + 1 < sub_slab_volumes_.size() ? sub_slab_first_value_[j + 1] : volume_values_;
    for (int64_t first = sub_slab_first_value_[j]; first < end; first += most) {
      pieces.push_back({first, std::min(most, end - first), j});
    }
  }
  const cudaStream_t copy = copy_stream_.get();
  const size_t volume_bytes = static_cast<size_t>(volume_values_) * sizeof(float);
  auto empty_piece = [&](size_t p) -> absl::Status {
    const size_t from = std::max(touched, static_cast<size_t>(pieces[p].first) * sizeof(float));
    if (from < volume_bytes) {
      touched = from + TouchPagesWhile(reinterpret_cast<char*>(volume_values) + from,
                                       volume_bytes - from, [&] {
                                         return cudaEventQuery(downloaded_[p % 2].get()) ==
                                                cudaErrorNotReady;
                                       });
    }
    TOMO_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(downloaded_[p % 2].get()));
    ParallelCopy(staging_->buffers[p % 2].get(), pieces[p].size,
                 volume_values + pieces[p].first);
    return absl::OkStatus();
  };
  for (size_t p = 0; p < pieces.size(); ++p) {
    if (p == 0 || pieces[p].sub_slab != pieces[p - 1].sub_slab) {
      TOMO_CUDA_RETURN_IF_ERROR(
          cudaStreamWaitEvent(copy, computed_[pieces[p].sub_slab].get(), 0));
    }
    TOMO_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(
        staging_->buffers[p % 2].get(), volume_.get() + pieces[p].first,
        static_cast<size_t>(pieces[p].size) * sizeof(float), cudaMemcpyDeviceToHost, copy));
    TOMO_CUDA_RETURN_IF_ERROR(cudaEventRecord(downloaded_[p % 2].get(), copy));
    if (p >= 1) TOMO_RETURN_IF_ERROR(empty_piece(p - 1));
  }
  TOMO_RETURN_IF_ERROR(empty_piece(pieces.size() - 1));
  TOMO_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(copy));
  TOMO_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  return absl::OkStatus();
}

absl::Status FilterAndBackProjectOnDevice(
    cudaStream_t stream, const VectorGeometry& geometry, const VolumeGeometry& volume_geometry,
    const Array3D& projections, const RampFilter& filter,
    const FilteredBackProjectionWeights& weights, BackProjectionWeighting weighting,
    Array3D& volume, PinnedStaging* staging, int64_t chunk_bytes,
    FilterAndBackProjectProfile* profile, int head_eighths) {
  if (volume.size() != volume_geometry.dims().count()) {
    return absl::InvalidArgumentError(absl::StrCat("volume: ", volume.size(), " values, the ",
                                                   "volume geometry has ",
                                                   volume_geometry.dims().count()));
  }
  return FilterAndBackProjectOnDevice(stream, geometry, volume_geometry, projections, filter,
                                      weights, weighting, volume.data(), staging, chunk_bytes,
                                      profile, head_eighths);
}

absl::Status FilterAndBackProjectOnDevice(
    cudaStream_t stream, const VectorGeometry& geometry, const VolumeGeometry& volume_geometry,
    const Array3D& projections, const RampFilter& filter,
    const FilteredBackProjectionWeights& weights, BackProjectionWeighting weighting,
    float* volume_values, PinnedStaging* staging, int64_t chunk_bytes,
    FilterAndBackProjectProfile* profile, int head_eighths) {
  int device = 0;
  TOMO_CUDA_RETURN_IF_ERROR(cudaGetDevice(&device));  // the caller's current device
  TOMO_ASSIGN_OR_RETURN(std::unique_ptr<DeviceFilterAndBackProject> pass,
                        DeviceFilterAndBackProject::Create(device, stream, geometry,
                                                           volume_geometry, filter, weights,
                                                           weighting, staging, chunk_bytes,
                                                           profile, head_eighths));
  const int64_t views = projections.dims().d0;
  const int64_t view_values = projections.dims().d1 * projections.dims().d2;
  // In the stream's chunks, so that each AddViews fills and launches exactly one.
  for (int64_t v0 = 0; v0 < views; v0 += pass->chunk_views()) {
    const int64_t count = std::min(pass->chunk_views(), views - v0);
    TOMO_RETURN_IF_ERROR(pass->AddViews(v0, projections.data() + v0 * view_values, count));
  }
  return pass->FinishInto(volume_values);
}

}  // namespace tomo::core::cuda
