// result-write-bench: how fast one large array (a job's raw volume, 540 MB for issue 4's
// FDK case) lands in a file, fsynced, when written by T threads: each thread writes its own
// range with pwrite(), copies it into a shared mapping of the file, or does either into a
// file that posix_fallocate sized first (on tmpfs that reserves the pages, so that a full
// file system is an error, not a SIGBUS in the copy), or copies into a mapping after each
// thread populated its own range (MADV_POPULATE_WRITE: the pages reserved in parallel;
// core/io/mapped_range.h, what tomod and the client do). It answers whether tomod's result write (one
// thread's write(), then fsync) would gain from more threads on the machine at hand.
//
//   build/bin/result-write-bench --dir /dev/shm [--mb 540] [--threads 1,2,4,8] [--repeat 5]
// Prints the median and the best of --repeat for every mode and thread count; the file is
// removed after each run. Needs no GPU and no server.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "CLI/CLI.hpp"
#include "core/io/mapped_range.h"

namespace {

enum class Mode { kPwrite, kMapped, kFallocatedPwrite, kFallocatedMapped, kPopulatedMapped };

const char* ModeName(Mode mode) {
  switch (mode) {
    case Mode::kPwrite:
      return "pwrite";
    case Mode::kMapped:
      return "mapped";
    case Mode::kFallocatedPwrite:
      return "fallocate+pwrite";
    case Mode::kFallocatedMapped:
      return "fallocate+mapped";
    case Mode::kPopulatedMapped:
      return "populate+mapped";
  }
  return "?";
}

// Runs part(begin, end) for `threads` contiguous ranges of [0, bytes) at once.
void InRanges(uint64_t bytes, int threads, const std::function<void(uint64_t, uint64_t)>& part) {
  std::vector<std::thread> running;
  for (int k = 0; k < threads; ++k) {
    const uint64_t begin = bytes / threads * k;
    const uint64_t end = k == threads - 1 ? bytes : bytes / threads * (k + 1);
    running.emplace_back(part, begin, end);
  }
  for (std::thread& thread : running) thread.join();
}

// One run: seconds from creating the file to its fsync, or a negative value on an error.
double WriteOnce(const std::string& path, const std::vector<char>& source, Mode mode,
                 int threads) {
  const uint64_t bytes = source.size();
  const auto start = std::chrono::steady_clock::now();
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return -1;
  bool ok = true;
  if (mode == Mode::kPopulatedMapped) {
    void* mapping = ::ftruncate(fd, static_cast<off_t>(bytes)) == 0
                        ? ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)
                        : MAP_FAILED;
    if (mapping == MAP_FAILED) {
      ok = false;
    } else {
      std::atomic<bool> failed{false};
      InRanges(bytes, threads, [&](uint64_t begin, uint64_t end) {
        const absl::Status copied = tomo::core::CopyIntoMappedRange(
            fd, static_cast<char*>(mapping), 0, begin, source.data() + begin, end - begin, path);
        if (!copied.ok()) {
          std::fprintf(stderr, "result-write-bench: %s\n", copied.ToString().c_str());
          failed = true;
        }
      });
      ok = ::munmap(mapping, bytes) == 0 && !failed;
    }
  } else if (mode == Mode::kMapped || mode == Mode::kFallocatedMapped) {
    const bool sized = mode == Mode::kMapped
                           ? ::ftruncate(fd, static_cast<off_t>(bytes)) == 0
                           : ::posix_fallocate(fd, 0, static_cast<off_t>(bytes)) == 0;
    void* mapping = sized
                        ? ::mmap(nullptr, bytes, PROT_WRITE, MAP_SHARED, fd, 0)
                        : MAP_FAILED;
    if (mapping == MAP_FAILED) {
      ok = false;
    } else {
      InRanges(bytes, threads, [&](uint64_t begin, uint64_t end) {
        std::memcpy(static_cast<char*>(mapping) + begin, source.data() + begin, end - begin);
      });
      ok = ::munmap(mapping, bytes) == 0;
    }
  } else {
    if (mode == Mode::kFallocatedPwrite) ok = ::posix_fallocate(fd, 0, static_cast<off_t>(bytes)) == 0;
    std::atomic<bool> failed{false};
    InRanges(bytes, threads, [&](uint64_t begin, uint64_t end) {
      while (begin < end) {
        const ssize_t n = ::pwrite(fd, source.data() + begin,
                                   std::min<uint64_t>(end - begin, uint64_t{8} << 20),
                                   static_cast<off_t>(begin));
        if (n <= 0) {
          failed = true;
          return;
        }
        begin += static_cast<uint64_t>(n);
      }
    });
    ok = ok && !failed;
  }
  ok = ok && ::fsync(fd) == 0;
  ::close(fd);
  ::unlink(path.c_str());
  if (!ok) return -1;
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("result-write-bench: one large array written to a file by several threads");
  std::string dir = "/dev/shm";
  uint64_t megabytes = 540;
  std::vector<int> thread_counts = {1, 2, 4, 8};
  int repeat = 5;
  app.add_option("--dir", dir, "directory for the file (tmpfs or disk)")->check(CLI::ExistingDirectory);
  app.add_option("--mb", megabytes, "size of the array in MB (2^20 bytes)")->check(CLI::Range(1, 1 << 16));
  app.add_option("--threads", thread_counts, "thread counts to try")->delimiter(',')->check(CLI::Range(1, 256));
  app.add_option("--repeat", repeat, "runs per mode and thread count")->check(CLI::Range(1, 100));
  CLI11_PARSE(app, argc, argv);

  std::vector<char> source(megabytes << 20);
  for (size_t i = 0; i < source.size(); i += 64) source[i] = static_cast<char>(i * 2654435761u >> 24);
  const std::string path = dir + "/result-write-bench.raw";
  std::printf("%llu MB into %s, fsynced; median and best of %d\n",
              static_cast<unsigned long long>(megabytes), path.c_str(), repeat);
  std::printf("%-18s %7s %9s %7s %9s\n", "mode", "threads", "median s", "GB/s", "best s");
  for (int threads : thread_counts) {
    for (Mode mode : {Mode::kPwrite, Mode::kMapped, Mode::kFallocatedPwrite,
                      Mode::kFallocatedMapped, Mode::kPopulatedMapped}) {
      std::vector<double> seconds;
      for (int r = 0; r < repeat; ++r) {
        const double s = WriteOnce(path, source, mode, threads);
        if (s < 0) {
          std::fprintf(stderr, "result-write-bench: %s with %d threads failed on %s: %s\n",
                       ModeName(mode), threads, path.c_str(), std::strerror(errno));
          return 1;
        }
        seconds.push_back(s);
      }
      std::sort(seconds.begin(), seconds.end());
      const double median = seconds[seconds.size() / 2];
      std::printf("%-18s %7d %9.3f %7.2f %9.3f\n", ModeName(mode), threads, median,
                  static_cast<double>(source.size()) / median / 1e9, seconds.front());
    }
  }
  return 0;
}
