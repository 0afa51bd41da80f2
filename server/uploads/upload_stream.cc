#include "server/uploads/upload_stream.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "core/base/parallel_for.h"
#include "core/base/status_macros.h"
#include "core/data/finite_values.h"
#include "core/devices/host_pinning.h"
#include "runner/job_execution.h"
#include "runner/job_input.h"

namespace tomo::server {
namespace {

// The input file, open for reading while the upload writes it.
class InputFile {
 public:
  static absl::StatusOr<InputFile> Open(const std::string& path) {
    // O_NOATIME: the writer changes the file's mtime with every chunk, so under relatime
    // every read would write the access time too, on the inode the writer holds.
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOATIME);
    if (fd < 0 && errno == EPERM) fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);  // not ours
    if (fd < 0) {
      const int error = errno;
      const std::string message = absl::StrCat("cannot open ", path, ": ", std::strerror(error));
      return error == ENOENT ? absl::NotFoundError(message) : absl::InternalError(message);
    }
    return InputFile(fd, path);
  }
  InputFile(InputFile&& other) noexcept : fd_(other.fd_), path_(std::move(other.path_)) {
    other.fd_ = -1;
  }
  InputFile& operator=(InputFile&&) = delete;
  ~InputFile() {
    if (fd_ >= 0) ::close(fd_);
  }

  absl::Status ReadAt(uint64_t offset, void* to, uint64_t bytes) const {
    char* p = static_cast<char*>(to);
    while (bytes > 0) {
      const ssize_t n = ::pread(fd_, p, bytes, static_cast<off_t>(offset));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        return absl::InternalError(absl::StrCat("cannot read ", bytes, " bytes at offset ",
                                                offset, " of ", path_, ": ",
                                                n == 0 ? "end of file" : std::strerror(errno)));
      }
      p += n;
      offset += static_cast<uint64_t>(n);
      bytes -= static_cast<uint64_t>(n);
    }
    return absl::OkStatus();
  }

 private:
  InputFile(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  int fd_;
  std::string path_;
};

// Threads that copy and check a piece while the upload goes on, and once every byte has
// arrived. A piece is one 4.8 MB view of the H100 benchmark's input, so the work is split by
// blocks, not views: split by views, one thread did all of it and fell 0.1-0.26 s behind a
// 3 GB/s upload. During the upload the follower's threads share the cores with the
// upload's own; after it, the cores are free for the backlog.
constexpr int kPieceThreads = 2;
constexpr int kCatchUpThreads = 8;
// Once every byte has arrived, pieces of this size: fewer, larger AddViews calls and
// thread starts for the backlog.
constexpr uint64_t kCatchUpPieceBytes = uint64_t{64} << 20;
// Each thread copies a block and checks it while it is still in the cache.
constexpr int64_t kAssembleBlockValues = int64_t{64} << 10;  // 256 KiB

absl::Status EndedError(UploadFeed::End end, int64_t views_added, int64_t views) {
  return absl::CancelledError(absl::StrCat("reconstruction while uploading given up after ",
                                           views_added, " of ", views, " views: the upload ",
                                           UploadFeedEndName(end)));
}

// Bytes [begin, end) of the input into `to`: from the kept chunks (in order) where they
// cover it, from the file once the upload has written them where they do not. An error
// is CANCELLED when the feed ended first (view_index names the piece's first view).
absl::Status CopyRange(const std::vector<UploadFeed::Chunk>& kept, const UploadFeed& feed,
                       const InputFile& file, uint64_t begin, uint64_t end, char* to,
                       int64_t view_index, int64_t views) {
  auto chunk = std::partition_point(kept.begin(), kept.end(), [begin](const UploadFeed::Chunk& c) {
    return c.offset + c.bytes->size() <= begin;
  });
  uint64_t at = begin;
  while (at < end) {
    if (chunk != kept.end() && chunk->offset <= at) {
      const uint64_t until = std::min<uint64_t>(end, chunk->offset + chunk->bytes->size());
      std::memcpy(to + (at - begin), chunk->bytes->data() + (at - chunk->offset), until - at);
      at = until;
      ++chunk;
      continue;
    }
    // Not kept: the follower had fallen behind by the feed's bound.
    const uint64_t until = chunk != kept.end() ? std::min<uint64_t>(end, chunk->offset) : end;
    const UploadFeed::End ended = feed.WaitForBytes(until);
    if (ended != UploadFeed::End::kNone) return EndedError(ended, view_index, views);
    TOMO_RETURN_IF_ERROR(file.ReadAt(at, to + (at - begin), until - at));
    at = until;
  }
  return absl::OkStatus();
}

// Views [first, first + count) of the input into `to`, copied and checked in blocks on
// `threads` threads; the first error in input order.
absl::Status AssembleViews(const std::vector<UploadFeed::Chunk>& kept, const UploadFeed& feed,
                           const InputFile& file, int64_t first, int64_t count,
                           const core::Dims3& dims, float* to, int threads) {
  const int64_t view_values = dims.d1 * dims.d2;
  const int64_t values = count * view_values;
  const uint64_t from = static_cast<uint64_t>(first * view_values) * sizeof(float);
  const int64_t blocks = (values + kAssembleBlockValues - 1) / kAssembleBlockValues;
  std::vector<absl::Status> errors(static_cast<size_t>(blocks));
  core::ParallelFor(
      blocks,
      [&](int64_t block_begin, int64_t block_end) {
        for (int64_t block = block_begin; block < block_end; ++block) {
          const int64_t begin = block * kAssembleBlockValues;
          const int64_t end = std::min(values, begin + kAssembleBlockValues);
          absl::Status& status = errors[static_cast<size_t>(block)];
          status = CopyRange(kept, feed, file, from + static_cast<uint64_t>(begin) * sizeof(float),
                             from + static_cast<uint64_t>(end) * sizeof(float),
                             reinterpret_cast<char*>(to + begin), first, dims.d0);
          if (status.ok()) {
            const int64_t bad = core::FirstNonFiniteIndex(to + begin, end - begin);
            if (bad >= 0) {
              status = NonFiniteValueError(to[begin + bad], first * view_values + begin + bad,
                                           dims.d1, dims.d2);
            }
          }
          if (!status.ok()) return;  // this thread's later blocks come after it
        }
      },
      threads);
  for (absl::Status& error : errors) {
    if (!error.ok()) return error;
  }
  return absl::OkStatus();
}

// Seconds since *start; moves *start to now.
double Since(absl::Time& start) {
  const absl::Time now = absl::Now();
  const double seconds = absl::ToDoubleSeconds(now - start);
  start = now;
  return seconds;
}

}  // namespace

void UploadFeed::Received(std::shared_ptr<const std::string> chunk) {
  absl::MutexLock lock(&mu_);
  const uint64_t offset = received_;
  received_ += chunk->size();
  if (!keeping_ || chunk->empty() || kept_bytes_ + chunk->size() > max_kept_bytes_) return;
  kept_bytes_ += chunk->size();
  kept_.push_back(Chunk{offset, std::move(chunk)});
}

void UploadFeed::DropKeptLocked() {
  kept_.clear();
  kept_bytes_ = 0;
}

void UploadFeed::StopKeeping() {
  absl::MutexLock lock(&mu_);
  keeping_ = false;
  DropKeptLocked();
}

UploadFeed::End UploadFeed::TakeReceived(uint64_t begin, uint64_t end, std::vector<Chunk>* kept) {
  kept->clear();
  absl::MutexLock lock(&mu_);
  auto ready = [this, end]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return received_ >= end || end_ != End::kNone;
  };
  mu_.Await(absl::Condition(&ready));
  if (received_ < end) return end_;
  for (const Chunk& chunk : kept_) {
    if (chunk.offset >= end) break;
    if (chunk.offset + chunk.bytes->size() > begin) kept->push_back(chunk);
  }
  while (!kept_.empty() && kept_.front().offset + kept_.front().bytes->size() <= end) {
    kept_bytes_ -= kept_.front().bytes->size();
    kept_.pop_front();
  }
  return End::kNone;
}

void UploadFeed::Written(uint64_t bytes) {
  absl::MutexLock lock(&mu_);
  written_ = std::max(written_, bytes);
}

void UploadFeed::Finish(End end) {
  absl::MutexLock lock(&mu_);
  if (end_ == End::kNone) end_ = end;
  if (end == End::kAborted || end == End::kYielded) {
    // Nobody will take them: an aborted upload receives no more, a yielded follower stops.
    keeping_ = false;
    DropKeptLocked();
  }
}

UploadFeed::End UploadFeed::WaitForBytes(uint64_t bytes) const {
  absl::MutexLock lock(&mu_);
  auto ready = [this, bytes]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return written_ >= bytes || end_ != End::kNone;
  };
  mu_.Await(absl::Condition(&ready));
  return written_ >= bytes ? End::kNone : end_;
}

UploadFeed::End UploadFeed::WaitForEnd() const {
  absl::MutexLock lock(&mu_);
  auto ended = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return end_ != End::kNone; };
  mu_.Await(absl::Condition(&ended));
  return end_;
}

uint64_t UploadFeed::received_bytes() const {
  absl::MutexLock lock(&mu_);
  return received_;
}

UploadFeed::End UploadFeed::end() const {
  absl::MutexLock lock(&mu_);
  return end_;
}

const char* UploadFeedEndName(UploadFeed::End end) {
  switch (end) {
    case UploadFeed::End::kNone:
      return "goes on";
    case UploadFeed::End::kCommitted:
      return "was committed";
    case UploadFeed::End::kAborted:
      return "was aborted";
    case UploadFeed::End::kYielded:
      return "was left: the device is needed for other work";
  }
  return "?";
}

bool CanReconstructWhileUploading(const ValidatedJob& job,
                                  const core::AlgorithmRegistry& registry) {
  return InputIsPlainProjections(job) && registry.StreamsViews(job.request);
}

absl::StatusOr<core::Array3D> ReconstructWhileUploading(const ValidatedJob& job,
                                                        const std::string& input_path,
                                                        UploadFeed& feed,
                                                        const core::AlgorithmRegistry& registry,
                                                        core::Backend& backend,
                                                        const core::RunContext& context,
                                                        uint64_t piece_bytes,
                                                        FollowTimes* times) {
  FollowTimes unused;
  FollowTimes& spent = times != nullptr ? *times : unused;
  absl::Cleanup stop_keeping = [&feed] { feed.StopKeeping(); };
  if (!CanReconstructWhileUploading(job, registry)) {
    return absl::FailedPreconditionError(
        "the job's input or algorithm cannot be reconstructed while it is uploaded");
  }
  const core::Dims3 dims = core::ProjectionDims(job.request.geometry);
  const uint64_t view_bytes = static_cast<uint64_t>(dims.d1 * dims.d2) * sizeof(float);
  if (job.input_bytes != view_bytes * static_cast<uint64_t>(dims.d0)) {
    return absl::InternalError(absl::StrCat("input.size_bytes ", job.input_bytes,
                                            " is not the geometry's ", dims.d0, " views of ",
                                            view_bytes, " bytes"));
  }
  TOMO_ASSIGN_OR_RETURN(std::unique_ptr<core::ViewStream> stream,
                        registry.BeginViewStream(job.request, backend, context));
  TOMO_ASSIGN_OR_RETURN(InputFile file, InputFile::Open(input_path));
  const auto whole_views = [view_bytes](uint64_t bytes) {
    return std::max<int64_t>(1, static_cast<int64_t>(bytes / std::max<uint64_t>(view_bytes, 1)));
  };
  const int64_t piece_views = whole_views(piece_bytes);
  const int64_t catch_up_views = std::max(piece_views, whole_views(kCatchUpPieceBytes));
  std::vector<float> piece(
      static_cast<size_t>(std::min(catch_up_views, dims.d0) * dims.d1 * dims.d2));
  // Page-locked where a device is there: the CUDA stream then copies each piece straight to
  // the device instead of gathering it into its own buffers first. Declared after piece:
  // unregistered before it is freed. Unpinned (a CPU worker, a failure) works the same.
  absl::StatusOr<std::unique_ptr<core::PinnedHostRegion>> pinned =
      core::PinHostMemory(piece.data(), piece.size() * sizeof(float));
  std::vector<UploadFeed::Chunk> kept;
  int64_t first = 0;
  while (first < dims.d0) {
    const bool all_received = feed.received_bytes() >= job.input_bytes;
    const int64_t count = std::min(all_received ? catch_up_views : piece_views, dims.d0 - first);
    const uint64_t offset = static_cast<uint64_t>(first) * view_bytes;
    const uint64_t bytes = static_cast<uint64_t>(count) * view_bytes;
    absl::Time start = absl::Now();
    const UploadFeed::End end = feed.TakeReceived(offset, offset + bytes, &kept);
    if (end != UploadFeed::End::kNone) return EndedError(end, first, dims.d0);
    spent.waiting_s += Since(start);
    TOMO_RETURN_IF_ERROR(AssembleViews(kept, feed, file, first, count, dims, piece.data(),
                                       all_received ? kCatchUpThreads : kPieceThreads));
    kept.clear();  // the chunks' memory goes as soon as the writer is done with them too
    spent.reading_s += Since(start);
    TOMO_RETURN_IF_ERROR(stream->AddViews(first, piece.data(), count));
    spent.feeding_s += Since(start);
    first += count;
  }
  absl::Time start = absl::Now();
  TOMO_ASSIGN_OR_RETURN(core::Array3D volume, stream->Finish());
  spent.finishing_s = Since(start);
  stream.reset();  // frees the device's buffers before the wait
  const UploadFeed::End end = feed.WaitForEnd();
  if (end != UploadFeed::End::kCommitted) return EndedError(end, dims.d0, dims.d0);
  return volume;
}

}  // namespace tomo::server
