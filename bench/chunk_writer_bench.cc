// chunk-writer-bench: how fast transfer::ChunkWriter puts a stream of 1 MiB chunks into a
// file (issue 4: tomod's upload into a tmpfs spool), beside the floor of one thread's
// write() + fsync. The chunks are random bytes made beforehand (a pool of 64, copied into a
// fresh string for each Append, as a gRPC receive hands over a fresh string); each mode
// writes --gb of them into a new file in --dir, fsynced, and the file is removed after.
//
//   write+fsync            one thread write()s the chunks from the pool, then fsync
//   ChunkWriter, crc on C  ChunkWriter (one write() thread, C checksum threads)
// (A parallel mapped mode was measured here and removed: slower on tmpfs and disk.)
//
//   build/bin/chunk-writer-bench --dir /dev/shm [--gb 2.38] [--repeat 3]
// Prints seconds and GB/s (the best of --repeat) and checks every run's CRC-32 and size.
// Needs no GPU; run it on the machine whose speed matters (the lead's 16-core host).
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "transfer/chunk_writer.h"
#include "transfer/crc32.h"

namespace {

using tomo::transfer::ChunkWriter;
using Clock = std::chrono::steady_clock;

constexpr size_t kPoolChunks = 64;

struct Workload {
  std::vector<std::string> pool;
  uint64_t chunks = 0;
  uint64_t chunk_bytes = 0;
  uint64_t bytes() const { return chunks * chunk_bytes; }
  const std::string& chunk(uint64_t i) const { return pool[i % pool.size()]; }
  uint32_t crc32 = 0;  // of all the chunks in order
};

Workload MakeWorkload(double gigabytes, uint64_t chunk_bytes) {
  Workload work;
  work.chunk_bytes = chunk_bytes;
  work.chunks = std::max<uint64_t>(1, static_cast<uint64_t>(gigabytes * 1e9) / chunk_bytes);
  std::mt19937_64 rng(20261122);
  for (size_t i = 0; i < kPoolChunks; ++i) {
    std::string bytes(chunk_bytes, '\0');
    for (size_t k = 0; k + 8 <= bytes.size(); k += 8) {
      const uint64_t word = rng();
      std::memcpy(&bytes[k], &word, 8);
    }
    work.pool.push_back(std::move(bytes));
  }
  std::vector<uint32_t> crcs;
  for (const std::string& bytes : work.pool) {
    crcs.push_back(tomo::transfer::Crc32Update(0, bytes.data(), bytes.size()));
  }
  for (uint64_t i = 0; i < work.chunks; ++i) {
    const uint32_t crc = crcs[i % crcs.size()];
    work.crc32 = i == 0 ? crc : tomo::transfer::Crc32Combine(work.crc32, crc, chunk_bytes);
  }
  return work;
}

int OpenNew(const std::string& path) {
  ::unlink(path.c_str());
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    std::perror(path.c_str());
    std::exit(1);
  }
  return fd;
}

// One run: the seconds it took, or an error (a wrong CRC-32 or size included).
absl::StatusOr<double> WriteWithPlainWrite(const Workload& work, const std::string& path) {
  const int fd = OpenNew(path);
  const Clock::time_point start = Clock::now();
  for (uint64_t i = 0; i < work.chunks; ++i) {
    const std::string& chunk = work.chunk(i);
    size_t done = 0;
    while (done < chunk.size()) {
      const ssize_t n = ::write(fd, chunk.data() + done, chunk.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        ::close(fd);
        return absl::InternalError(absl::StrCat("write ", path, ": ", std::strerror(errno)));
      }
      done += static_cast<size_t>(n);
    }
  }
  const bool synced = ::fsync(fd) == 0;
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  ::close(fd);
  if (!synced) return absl::InternalError(absl::StrCat("fsync ", path));
  return seconds;
}

absl::StatusOr<double> WriteWithChunkWriter(const Workload& work, const std::string& path,
                                            ChunkWriter::Options options) {
  const int fd = OpenNew(path);
  const Clock::time_point start = Clock::now();
  auto writer = ChunkWriter::Create(fd, path, options);
  for (uint64_t i = 0; i < work.chunks; ++i) {
    absl::StatusOr<bool> room = writer->Append(work.chunk(i));  // a fresh copy, as received
    if (!room.ok()) return room.status();
    if (!*room) writer->WaitForRoom();
  }
  absl::StatusOr<ChunkWriter::Summary> summary = writer->Finish(/*sync=*/true);
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  writer.reset();
  if (!summary.ok()) return summary.status();
  if (summary->bytes != work.bytes() || summary->crc32 != work.crc32) {
    return absl::DataLossError(absl::StrCat("wrong summary: ", summary->bytes, " bytes, crc ",
                                            summary->crc32, "; expected ", work.bytes(),
                                            ", ", work.crc32));
  }
  if (std::filesystem::file_size(path) != work.bytes()) {
    return absl::DataLossError(absl::StrCat(path, " has ", std::filesystem::file_size(path),
                                            " bytes, not ", work.bytes()));
  }
  return seconds;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"chunk-writer-bench: ChunkWriter vs one thread's write()"};
  std::string dir;
  double gigabytes = 2.38;
  uint64_t chunk_bytes = uint64_t{1} << 20;
  int checksum_threads = 2;
  int repeat = 3;
  app.add_option("--dir", dir, "where the file goes (tmpfs: /dev/shm)")->required();
  app.add_option("--gb", gigabytes, "gigabytes written per run")->check(CLI::Range(0.001, 1e3));
  app.add_option("--chunk-bytes", chunk_bytes, "bytes per chunk")
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 30));
  app.add_option("--checksum-threads", checksum_threads,
                 "ChunkWriter's checksum threads")
      ->check(CLI::Range(1, 64));
  app.add_option("--repeat", repeat, "runs per mode; the best is printed")
      ->check(CLI::Range(1, 100));
  CLI11_PARSE(app, argc, argv);

  const Workload work = MakeWorkload(gigabytes, chunk_bytes);
  const std::string path = (std::filesystem::path(dir) / "chunk-writer-bench.bin").string();
  std::printf("%.3f GB in %llu chunks of %llu bytes into %s, fsynced; best of %d\n",
              work.bytes() / 1e9, static_cast<unsigned long long>(work.chunks),
              static_cast<unsigned long long>(chunk_bytes), path.c_str(), repeat);
  std::printf("%-34s %9s %9s\n", "mode", "seconds", "GB/s");

  bool all_ok = true;
  auto measure = [&](const std::string& name, const std::function<absl::StatusOr<double>()>& run) {
    double best = 0;
    for (int r = 0; r < repeat; ++r) {
      absl::StatusOr<double> seconds = run();
      ::unlink(path.c_str());
      if (!seconds.ok()) {
        std::printf("%-34s FAILED: %s\n", name.c_str(), seconds.status().ToString().c_str());
        all_ok = false;
        return;
      }
      best = r == 0 ? *seconds : std::min(best, *seconds);
    }
    std::printf("%-34s %9.3f %9.2f\n", name.c_str(), best, work.bytes() / best / 1e9);
    std::fflush(stdout);
  };

  measure("write+fsync (1 thread, no copy)", [&] { return WriteWithPlainWrite(work, path); });
  ChunkWriter::Options options;
  options.checksum_threads = checksum_threads;
  measure(absl::StrCat("ChunkWriter, crc on ", checksum_threads),
          [&] { return WriteWithChunkWriter(work, path, options); });
  return all_ok ? 0 : 1;
}
