#include "server/jobs/matrix_cache.h"

#include <utility>

#include "core/base/status_macros.h"

namespace tomo::server {
namespace {

namespace sm = ::tomo::core::system_matrix;

void Append(std::string& key, const void* bytes, size_t size) {
  key.append(static_cast<const char*>(bytes), size);
}
void AppendVec(std::string& key, const core::Vec3& v) {
  Append(key, &v.x, sizeof(v.x));
  Append(key, &v.y, sizeof(v.y));
  Append(key, &v.z, sizeof(v.z));
}

}  // namespace

std::string MatrixCache::KeyOf(const core::VectorGeometry& geometry,
                               const core::VolumeGeometry& volume, sm::MatrixFormat format) {
  std::string key;
  const int64_t header[] = {static_cast<int64_t>(format),
                            static_cast<int64_t>(geometry.beam()),
                            static_cast<int64_t>(geometry.detector()),
                            geometry.rows(),
                            geometry.columns(),
                            geometry.num_views(),
                            volume.size().x,
                            volume.size().y,
                            volume.size().z};
  Append(key, header, sizeof(header));
  AppendVec(key, volume.voxel_size_mm());
  AppendVec(key, volume.center_mm());
  for (const core::ViewVectors& view : geometry.views()) {
    AppendVec(key, view.source);
    AppendVec(key, view.detector_center);
    AppendVec(key, view.u);
    AppendVec(key, view.v);
  }
  return key;
}

absl::StatusOr<MatrixCache::Found> MatrixCache::Get(const core::VectorGeometry& geometry,
                                                    const core::VolumeGeometry& volume,
                                                    sm::MatrixFormat format,
                                                    uint64_t budget_bytes) {
  std::string key = KeyOf(geometry, volume, format);
  {
    absl::MutexLock lock(&mutex_);
    RecountAndDropOver(capacity_bytes_);
    if (auto found = index_.find(key); found != index_.end()) {
      recent_.splice(recent_.begin(), recent_, found->second);
      ++hits_;
      return Found{found->second->matrix, true};
    }
    ++misses_;
  }
  TOMO_ASSIGN_OR_RETURN(sm::StoredMatrix built,
                        sm::BuildStoredMatrix(geometry, volume, format, budget_bytes));
  auto matrix = std::make_shared<const sm::StoredMatrix>(std::move(built));
  absl::MutexLock lock(&mutex_);
  Keep(std::move(key), matrix);
  return Found{std::move(matrix), false};
}

void MatrixCache::Keep(std::string key, std::shared_ptr<const sm::StoredMatrix> matrix) {
  const uint64_t bytes = matrix->held_bytes();
  if (bytes > capacity_bytes_ || index_.count(key) > 0) return;
  RecountAndDropOver(capacity_bytes_ - bytes);
  recent_.push_front(Entry{key, std::move(matrix), bytes});
  index_.emplace(std::move(key), recent_.begin());
  kept_bytes_ += bytes;
}

void MatrixCache::RecountAndDropOver(uint64_t capacity) {
  kept_bytes_ = 0;
  for (Entry& entry : recent_) {
    entry.bytes = entry.matrix->held_bytes();
    kept_bytes_ += entry.bytes;
  }
  // Layouts first, least recently used first: a layout is rebuilt from its matrix faster
  // than the matrix is.
  for (auto entry = recent_.rbegin(); entry != recent_.rend() && kept_bytes_ > capacity; ++entry) {
    if (entry->bytes == entry->matrix->bytes()) continue;
    entry->matrix->ForgetTiledLayouts();
    kept_bytes_ -= entry->bytes - entry->matrix->bytes();
    entry->bytes = entry->matrix->bytes();
  }
  while (kept_bytes_ > capacity && !recent_.empty()) {
    kept_bytes_ -= recent_.back().bytes;
    index_.erase(recent_.back().key);
    recent_.pop_back();
  }
}

uint64_t MatrixCache::kept_bytes() const {
  // As held now: with the layouts built since the last Get (dropped, if over, at the next).
  absl::MutexLock lock(&mutex_);
  uint64_t bytes = 0;
  for (const Entry& entry : recent_) bytes += entry.matrix->held_bytes();
  return bytes;
}
int64_t MatrixCache::kept_matrices() const {
  absl::MutexLock lock(&mutex_);
  return static_cast<int64_t>(recent_.size());
}
int64_t MatrixCache::hits() const {
  absl::MutexLock lock(&mutex_);
  return hits_;
}
int64_t MatrixCache::misses() const {
  absl::MutexLock lock(&mutex_);
  return misses_;
}
int64_t MatrixCache::layout_counts() const {
  absl::MutexLock lock(&mutex_);
  return layout_counts_;
}

absl::StatusOr<uint64_t> MatrixCache::TiledLayoutBytes(const core::VectorGeometry& geometry,
                                                       const core::VolumeGeometry& volume) {
  // The layout belongs to the symmetric format's matrix of the scan.
  std::string key = KeyOf(geometry, volume, sm::MatrixFormat::kSymmetric);
  {
    absl::MutexLock lock(&mutex_);
    if (auto found = layout_bytes_.find(key); found != layout_bytes_.end()) return found->second;
    ++layout_counts_;
  }
  // Counted outside the lock (two jobs of one new scan at once may both count it).
  TOMO_ASSIGN_OR_RETURN(const uint64_t bytes,
                        StoredMatrixSource::TiledLayoutBytes(geometry, volume));
  absl::MutexLock lock(&mutex_);
  if (layout_bytes_.emplace(key, bytes).second) {
    layout_keys_.push_back(std::move(key));
    if (layout_keys_.size() > kLayoutCounts) {
      layout_bytes_.erase(layout_keys_.front());
      layout_keys_.pop_front();
    }
  }
  return bytes;
}

}  // namespace tomo::server
