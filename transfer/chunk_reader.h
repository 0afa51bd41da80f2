// Reads files as a sequence of chunks ahead of the consumer: reader threads pread the next
// chunks (and checksum them) while the consumer sends the current one, so that a gRPC stream
// never waits on the disk or the checksum. The chunks come out in order: the files one after
// the other, each from its start (the first one from `offset`), in chunks of at most
// chunk_bytes that do not cross files. The sizes are fixed when opened: a file that
// shrinks or grows meanwhile is DATA_LOSS.
//
//   TOMO_ASSIGN_OR_RETURN(auto reader, ChunkReader::Open({"a.raw", "b.raw"}, 0, {}));
//   while (true) {
//     TOMO_ASSIGN_OR_RETURN(std::optional<ChunkReader::Chunk> chunk, reader->Next());
//     if (!chunk) break;   // the end
//     Send(chunk->bytes);  // chunk->crc32 is the CRC-32 of these bytes (with checksum)
//   }
//
// Striped: with Options::stripe_count = N > 1 the reader yields only stripe
// stripe_index of the bytes (StripeLayout below): the units u of stripe_bytes from offset
// with u % N == stripe_index, in order, each in chunks of at most chunk_bytes that end at
// the unit's end. Chunk::file and Chunk::offset say where each chunk belongs. tomod's
// FetchResult sends a striped fetch's streams this way (tomoserve.proto, FetchResultRequest).
//
// Mapped (Options::map_files): the files are mapped read-only and a chunk is a view of its
// bytes in the mapping (Chunk::mapped, kept alive by Chunk::mapping) instead of a copy; the
// reader threads fault the chunk's pages in ahead of the consumer, so that a consumer that
// sends the view (tomod's FetchResult hands it to gRPC as a slice) does not wait on the
// disk, and nothing copies the bytes before the socket does. Only for files nobody
// truncates while they are read (tomod's published results): each chunk is checked against
// the file's size before its pages are touched, but a file cut after that check raises
// SIGBUS where the view is read.
//
// Next/TryNext from one consumer thread at a time.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace tomo::transfer {

// Which bytes of [offset, size) one stripe of a striped transfer carries: the range is cut
// into units of unit_bytes from offset (the last one clipped at size), unit u belonging to
// stripe u % count. count 0 or 1: one stripe, every byte. Both ends of a striped fetch use
// it: tomod to send a stripe, the client to check what arrived.
//
//   StripeLayout stripe;  // stripe 1 of 3 of a 10 MiB file in 1 MiB units
//   stripe.size = 10 << 20;
//   stripe.count = 3;
//   stripe.index = 1;
//   for (auto [begin, end] = stripe.NextRange(0, 1 << 20); begin < end;
//        std::tie(begin, end) = stripe.NextRange(end, 1 << 20)) { Send(begin, end); }
struct StripeLayout {
  uint64_t offset = 0;
  uint64_t size = 0;
  uint32_t count = 1;
  uint32_t index = 0;           // < count (or 0 with count 0 or 1)
  uint64_t unit_bytes = 1 << 20;  // > 0 when count > 1

  // The first bytes at or after `at` that this stripe carries, within one unit and at most
  // max_bytes (> 0) long: [begin, end). {size, size} when none are left.
  std::pair<uint64_t, uint64_t> NextRange(uint64_t at, uint64_t max_bytes) const;
  // Bytes this stripe carries in all.
  uint64_t StripeBytes() const;
  // Number of units of [offset, size) (1 when count <= 1 and offset < size).
  uint64_t UnitCount() const;
};

class ChunkReader {
 public:
  struct Options {
    size_t chunk_bytes = size_t{1} << 20;
    int threads = 3;
    size_t chunks_ahead = 16;  // read but not yet taken, at most
    bool checksum = true;      // fill Chunk::crc32
    // One stripe of the bytes from offset (StripeLayout over the files back to back);
    // stripe_count 0 or 1: every byte.
    uint32_t stripe_count = 1;
    uint32_t stripe_index = 0;
    uint64_t stripe_bytes = 1 << 20;
    bool map_files = false;  // chunks are views of read-only mappings (see above)
  };
  struct Chunk {
    std::string bytes;  // empty with map_files
    // With map_files: the bytes, in the file's mapping, valid while mapping is held.
    std::string_view mapped;
    std::shared_ptr<const void> mapping;
    uint32_t crc32 = 0;
    size_t file = 0;      // index into the paths
    uint64_t offset = 0;  // in that file

    std::string_view view() const { return mapping ? mapped : std::string_view(bytes); }
  };

  // NOT_FOUND / PERMISSION_DENIED / INTERNAL naming the path when a file cannot be opened
  // or is not a regular file; OUT_OF_RANGE when offset is beyond the first file's end;
  // INVALID_ARGUMENT naming stripe_index or stripe_bytes when stripe_index >= stripe_count
  // or stripe_bytes is 0 (with stripe_count > 1).
  static absl::StatusOr<std::unique_ptr<ChunkReader>> Open(const std::vector<std::string>& paths,
                                                           uint64_t offset, Options options);
  ~ChunkReader();
  ChunkReader(const ChunkReader&) = delete;
  ChunkReader& operator=(const ChunkReader&) = delete;

  // Bytes the chunks will hold in all (from offset; of the stripe only, when striped).
  uint64_t total_bytes() const;

  // The next chunk, waiting for it; nullopt after the last. DATA_LOSS/INTERNAL naming the
  // file on a read error or a size change.
  absl::StatusOr<std::optional<Chunk>> Next();
  // Without waiting: true with *out set when the next chunk (or the end, or an error) is
  // ready; false when it is not, and then on_ready is called once (on a reader thread) when
  // it is. For callback-driven streams.
  bool TryNext(absl::StatusOr<std::optional<Chunk>>* out, std::function<void()> on_ready);

 private:
  struct Span {
    size_t file;
    uint64_t offset;
    size_t size;
  };
  // Everything the reader threads use, shared with them: a callback that destroys the
  // ChunkReader from a reader thread leaves that thread a valid state to see stopping in.
  struct State;
  explicit ChunkReader(std::shared_ptr<State> state);
  static void ReadLoop(const std::shared_ptr<State>& state);
  // A chunk of span: its bytes read (pread) or viewed in the file's mapping (map_files).
  static absl::Status Read(const State& s, const Span& span, Chunk* chunk);
  static absl::Status ViewMapped(const State& s, const Span& span, Chunk* chunk);

  std::shared_ptr<State> state_;
  std::vector<std::thread> readers_;
};

}  // namespace tomo::transfer
