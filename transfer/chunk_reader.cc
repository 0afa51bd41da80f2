#include "transfer/chunk_reader.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <tuple>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "transfer/crc32.h"

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22  // Linux 5.14; older C libraries lack the name
#endif

namespace tomo::transfer {
namespace {

absl::Status OpenError(int error, const std::string& path) {
  std::string message = absl::StrCat("cannot open ", path, ": ", std::strerror(error));
  if (error == ENOENT) return absl::NotFoundError(message);
  if (error == EACCES || error == EPERM) return absl::PermissionDeniedError(message);
  return absl::InternalError(message);
}

// A read-only shared mapping of a whole file, unmapped with its last holder.
std::shared_ptr<const void> MapReadOnly(int fd, uint64_t size, const std::string& path,
                                        absl::Status* status) {
  if (size == 0) return std::make_shared<const char>('\0');  // nothing to map, nothing to view
  void* base = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) {
    *status = absl::InternalError(absl::StrCat("cannot map ", path, ": ", std::strerror(errno)));
    return nullptr;
  }
  return std::shared_ptr<const void>(
      base, [size](const void* p) { ::munmap(const_cast<void*>(p), size); });
}

// Faults in the pages of [data, data + size) of a mapping, for reading, so that whoever
// reads them next (a socket's copy) finds them resident. MADV_POPULATE_READ (Linux 5.14)
// reports a page beyond the file's end as EFAULT instead of raising SIGBUS; kernels that
// do not know it (EINVAL) get one read per page.
absl::Status FaultIn(const char* data, size_t size, const std::string& path, uint64_t offset) {
  const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t begin = reinterpret_cast<uintptr_t>(data) & ~(page - 1);
  const uintptr_t end = reinterpret_cast<uintptr_t>(data) + size;
  int advised;
  do {
    advised = ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_POPULATE_READ);
  } while (advised != 0 && errno == EINTR);
  if (advised == 0) return absl::OkStatus();
  if (errno != EINVAL) {
    return absl::DataLossError(absl::StrCat(
        "cannot read ", path, " at byte ", offset, ": ",
        errno == EFAULT ? "the file is shorter than when it was opened" : std::strerror(errno)));
  }
  for (uintptr_t p = begin; p < end; p += page) {
    (void)*reinterpret_cast<const volatile char*>(std::max(p, reinterpret_cast<uintptr_t>(data)));
  }
  return absl::OkStatus();
}

}  // namespace

std::pair<uint64_t, uint64_t> StripeLayout::NextRange(uint64_t at, uint64_t max_bytes) const {
  at = std::max(at, offset);
  if (at >= size) return {size, size};
  max_bytes = std::max<uint64_t>(1, max_bytes);
  if (count <= 1) return {at, at + std::min(max_bytes, size - at)};
  uint64_t unit = (at - offset) / unit_bytes;
  const uint64_t behind = (index + count - unit % count) % count;  // units to skip
  if (behind > 0) {
    unit += behind;
    // A unit past the end (checked before multiplying, which could overflow).
    if (unit >= UnitCount()) return {size, size};
    at = offset + unit * unit_bytes;
  }
  const uint64_t unit_end = std::min(size, offset + (unit + 1) * unit_bytes);
  return {at, at + std::min(max_bytes, unit_end - at)};
}

uint64_t StripeLayout::UnitCount() const {
  if (offset >= size) return 0;
  if (count <= 1) return 1;
  return (size - offset + unit_bytes - 1) / unit_bytes;
}

uint64_t StripeLayout::StripeBytes() const {
  if (offset >= size) return 0;
  if (count <= 1) return size - offset;
  const uint64_t units = UnitCount();
  if (units <= index) return 0;
  const uint64_t mine = (units - 1 - index) / count + 1;
  uint64_t bytes = mine * unit_bytes;
  if ((units - 1) % count == index) bytes -= units * unit_bytes - (size - offset);
  return bytes;
}

struct ChunkReader::State {
  ~State() {
    for (int fd : fds) ::close(fd);
  }
  bool ReadyLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    return !error.ok() || next_to_take >= spans.size() || ready.count(next_to_take) > 0;
  }
  absl::StatusOr<std::optional<Chunk>> TakeLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);

  std::vector<std::string> paths;
  std::vector<int> fds;
  std::vector<std::shared_ptr<const void>> mappings;  // with map_files, of each file
  std::vector<uint64_t> sizes;                        // of each file when opened
  std::vector<Span> spans;
  uint64_t total_bytes = 0;
  Options options;

  absl::Mutex mu;
  size_t next_to_read ABSL_GUARDED_BY(mu) = 0;
  size_t next_to_take ABSL_GUARDED_BY(mu) = 0;
  std::map<size_t, Chunk> ready ABSL_GUARDED_BY(mu);
  absl::Status error ABSL_GUARDED_BY(mu);
  bool stopping ABSL_GUARDED_BY(mu) = false;
  std::function<void()> on_ready ABSL_GUARDED_BY(mu);
};

absl::StatusOr<std::unique_ptr<ChunkReader>> ChunkReader::Open(
    const std::vector<std::string>& paths, uint64_t offset, Options options) {
  const uint32_t stripes = std::max<uint32_t>(1, options.stripe_count);
  if (options.stripe_index >= stripes) {
    return absl::InvalidArgumentError(absl::StrCat("stripe_index: ", options.stripe_index,
                                                   " is not below stripe_count ", stripes));
  }
  if (stripes > 1 && options.stripe_bytes == 0) {
    return absl::InvalidArgumentError(
        "stripe_bytes: 0; a striped read needs units of at least 1 byte");
  }
  auto state = std::make_shared<State>();
  options.chunk_bytes = std::max<size_t>(1, options.chunk_bytes);
  options.chunks_ahead = std::max<size_t>(1, options.chunks_ahead);
  state->options = options;
  state->paths = paths;
  std::vector<uint64_t> stream_ends;  // where each file's bytes end in the stream from offset
  uint64_t stream_bytes = 0;
  for (size_t f = 0; f < paths.size(); ++f) {
    int fd = ::open(paths[f].c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return OpenError(errno, paths[f]);
    state->fds.push_back(fd);  // closed by ~State
    struct stat st;
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      return absl::InvalidArgumentError(absl::StrCat(paths[f], " is not a regular file"));
    }
    const uint64_t size = static_cast<uint64_t>(st.st_size);
    const uint64_t start = f == 0 ? offset : 0;
    if (start > size) {
      return absl::OutOfRangeError(absl::StrCat("offset ", offset, " is beyond the end of ",
                                                paths[f], " (", size, " bytes)"));
    }
    stream_bytes += size - start;
    stream_ends.push_back(stream_bytes);
    state->sizes.push_back(size);
    if (options.map_files) {
      absl::Status mapped;
      state->mappings.push_back(MapReadOnly(fd, size, paths[f], &mapped));
      if (!mapped.ok()) return mapped;
    }
  }
  // The stripe's ranges of the stream, cut at the files' ends and into chunks.
  StripeLayout stripe;
  stripe.size = stream_bytes;
  stripe.count = stripes;
  stripe.index = options.stripe_index;
  stripe.unit_bytes = options.stripe_bytes;
  size_t f = 0;
  for (auto [begin, end] = stripe.NextRange(0, options.chunk_bytes); begin < end;
       std::tie(begin, end) = stripe.NextRange(end, options.chunk_bytes)) {
    while (begin >= stream_ends[f]) ++f;
    end = std::min(end, stream_ends[f]);  // the next range starts at the cut
    const uint64_t in_file = state->sizes[f] - (stream_ends[f] - begin);
    state->spans.push_back({f, in_file, static_cast<size_t>(end - begin)});
    state->total_bytes += end - begin;
  }
  std::unique_ptr<ChunkReader> reader(new ChunkReader(state));
  for (int i = 0; i < std::max(1, options.threads); ++i) {
    reader->readers_.emplace_back([state] { ReadLoop(state); });
  }
  return reader;
}

ChunkReader::ChunkReader(std::shared_ptr<State> state) : state_(std::move(state)) {}

ChunkReader::~ChunkReader() {
  {
    absl::MutexLock lock(&state_->mu);
    state_->stopping = true;
  }
  for (std::thread& thread : readers_) {
    // From an on_ready callback, a reader thread destroys its own reader: it finds
    // stopping when the callback returns and ends, holding the state until then.
    if (thread.get_id() == std::this_thread::get_id()) {
      thread.detach();
    } else {
      thread.join();
    }
  }
}

uint64_t ChunkReader::total_bytes() const { return state_->total_bytes; }

void ChunkReader::ReadLoop(const std::shared_ptr<State>& state) {
  State& s = *state;
  for (;;) {
    size_t index;
    {
      absl::MutexLock lock(&s.mu);
      s.mu.Await(absl::Condition(
          +[](State* s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s->mu) {
            return s->stopping || !s->error.ok() || s->next_to_read >= s->spans.size() ||
                   s->next_to_read < s->next_to_take + s->options.chunks_ahead;
          },
          &s));
      if (s.stopping || !s.error.ok() || s.next_to_read >= s.spans.size()) return;
      index = s.next_to_read++;
    }
    const Span& span = s.spans[index];
    Chunk chunk;
    chunk.file = span.file;
    chunk.offset = span.offset;
    absl::Status status = s.options.map_files ? ViewMapped(s, span, &chunk) : Read(s, span, &chunk);
    if (status.ok() && s.options.checksum) {
      const std::string_view bytes = chunk.view();
      chunk.crc32 = Crc32Update(0, bytes.data(), bytes.size());
    }
    std::function<void()> notify;
    {
      absl::MutexLock lock(&s.mu);
      if (!status.ok()) {
        if (s.error.ok()) s.error = status;
      } else {
        s.ready.emplace(index, std::move(chunk));
      }
      if (s.on_ready && s.ReadyLocked()) notify = std::exchange(s.on_ready, nullptr);
    }
    if (notify) notify();
  }
}

absl::Status ChunkReader::Read(const State& s, const Span& span, Chunk* chunk) {
  chunk->bytes.resize(span.size);
  size_t done = 0;
  while (done < span.size) {
    ssize_t n = ::pread(s.fds[span.file], chunk->bytes.data() + done, span.size - done,
                        static_cast<off_t>(span.offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      return absl::DataLossError(absl::StrCat(
          "cannot read ", s.paths[span.file], " at byte ", span.offset + done, ": ",
          n < 0 ? std::strerror(errno) : "the file is shorter than when it was opened"));
    }
    done += static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

absl::Status ChunkReader::ViewMapped(const State& s, const Span& span, Chunk* chunk) {
  // A file cut since Open would fault beyond its end: refuse the chunk instead.
  struct stat st;
  if (::fstat(s.fds[span.file], &st) != 0 ||
      static_cast<uint64_t>(st.st_size) < span.offset + span.size) {
    return absl::DataLossError(absl::StrCat("cannot read ", s.paths[span.file], " at byte ",
                                            span.offset,
                                            ": the file is shorter than when it was opened"));
  }
  const std::shared_ptr<const void>& mapping = s.mappings[span.file];
  const char* data = static_cast<const char*>(mapping.get()) + span.offset;
  if (absl::Status in = FaultIn(data, span.size, s.paths[span.file], span.offset); !in.ok()) {
    return in;
  }
  chunk->mapped = std::string_view(data, span.size);
  chunk->mapping = mapping;
  return absl::OkStatus();
}

absl::StatusOr<std::optional<ChunkReader::Chunk>> ChunkReader::State::TakeLocked() {
  if (!error.ok()) return error;
  if (next_to_take >= spans.size()) {
    // A file that grew since Open would otherwise go unnoticed.
    for (size_t f = 0; f < fds.size(); ++f) {
      struct stat st;
      if (::fstat(fds[f], &st) == 0 && static_cast<uint64_t>(st.st_size) != sizes[f]) {
        return absl::DataLossError(absl::StrCat(
            paths[f], " changed size while it was read: ", sizes[f], " bytes, then ", st.st_size));
      }
    }
    return std::optional<Chunk>();
  }
  auto it = ready.find(next_to_take);
  Chunk chunk = std::move(it->second);
  ready.erase(it);
  ++next_to_take;
  return std::optional<Chunk>(std::move(chunk));
}

absl::StatusOr<std::optional<ChunkReader::Chunk>> ChunkReader::Next() {
  absl::MutexLock lock(&state_->mu);
  state_->mu.Await(absl::Condition(
      +[](State* s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s->mu) { return s->ReadyLocked(); },
      state_.get()));
  return state_->TakeLocked();
}

bool ChunkReader::TryNext(absl::StatusOr<std::optional<Chunk>>* out,
                          std::function<void()> on_ready) {
  absl::MutexLock lock(&state_->mu);
  if (!state_->ReadyLocked()) {
    state_->on_ready = std::move(on_ready);
    return false;
  }
  *out = state_->TakeLocked();
  return true;
}

}  // namespace tomo::transfer
