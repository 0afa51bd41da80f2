// Spool: tomod's directory of job data, and the small file helpers the daemon needs.
//
//   <root>/                           locked (flock on the open directory) by the daemon
//                                     that uses the spool, for its whole life
//   <root>/tomod.lock                 that daemon's pid, for people; not the lock
//   <root>/tomod.db (+ -wal, -shm)    the job records (server/storage/job_store.h)
//   <root>/jobs/<id>/input.bin        the uploaded projections, fsynced before QUEUED
//   <root>/jobs/<id>/results.partial/ a run's results while it writes them
//   <root>/jobs/<id>/results/<name>   result files (e.g. volume.raw), renamed from
//                                     results.partial once complete and fsynced
//
// A job directory without a record in tomod.db is a leftover of a crash: tomod removes it
// at start-up.
//
//   TOMO_ASSIGN_OR_RETURN(std::unique_ptr<Spool> spool, Spool::Open("/var/lib/tomoserve/spool"));
//   TOMO_RETURN_IF_ERROR(spool->CreateJobDir(id));
//   TOMO_ASSIGN_OR_RETURN(AppendFile input, AppendFile::Create(spool->InputPath(id)));
//
// Errors name the path: FAILED_PRECONDITION when another daemon holds the spool, INTERNAL
// (or the errno's code) for file-system failures. Spool is thread-safe (const methods and
// per-job paths); AppendFile is not (one writer).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tomo::server {

class Spool {
 public:
  // Creates root and root/jobs when missing, checks that they are writable and locks the
  // spool for this process.
  static absl::StatusOr<std::unique_ptr<Spool>> Open(const std::string& root);
  ~Spool();
  Spool(const Spool&) = delete;
  Spool& operator=(const Spool&) = delete;

  const std::string& root() const { return root_; }
  std::string JobDir(const std::string& id) const;
  std::string InputPath(const std::string& id) const;
  std::string ResultsDir(const std::string& id) const;
  std::string ResultPath(const std::string& id, const std::string& name) const;
  std::string ResultsPartialDir(const std::string& id) const;
  std::string DatabasePath() const;

  // ALREADY_EXISTS when the directory is there already.
  absl::Status CreateJobDir(const std::string& id) const;
  // Removes the job's directory and everything in it; OK when it does not exist.
  absl::Status RemoveJobDir(const std::string& id) const;
  // Names of the directories under jobs/ (job ids, also those of earlier runs).
  std::vector<std::string> ListJobDirs() const;
  // fsync of jobs/, so that the names of new job directories are durable.
  absl::Status SyncJobsDir() const;
  // Bytes of the regular files under the job's directory (0 when it does not exist).
  uint64_t JobDiskBytes(const std::string& id) const;
  // Renames ResultsPartialDir over ResultsDir and fsyncs the job directory, so that the
  // results appear complete or not at all.
  absl::Status PublishResults(const std::string& id) const;

 private:
  Spool(std::string root, int lock_fd) : root_(std::move(root)), lock_fd_(lock_fd) {}
  std::string root_;
  int lock_fd_;
};

// A file opened for appending, created exclusively; closed (not synced) on destruction.
class AppendFile {
 public:
  static absl::StatusOr<AppendFile> Create(const std::string& path);
  AppendFile(AppendFile&& other) noexcept;
  AppendFile& operator=(AppendFile&& other) noexcept;
  AppendFile(const AppendFile&) = delete;
  AppendFile& operator=(const AppendFile&) = delete;
  ~AppendFile();

  absl::Status Append(absl::string_view data);
  // fsync of the file, then of its directory (so the name is durable too).
  absl::Status Sync();
  absl::Status Close();
  // Hands the descriptor over (to a transfer::ChunkWriter); this object then holds none.
  int Release() { return std::exchange(fd_, -1); }
  const std::string& path() const { return path_; }
  int fd() const { return fd_; }

 private:
  AppendFile(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  std::string path_;
  int fd_ = -1;
};

absl::Status FsyncDirectory(const std::string& path);
// Writes contents to a temporary file beside path, fsyncs it and renames it over path, so a
// reader sees either nothing or the whole file.
absl::Status WriteFileAtomically(const std::string& path, absl::string_view contents);

}  // namespace tomo::server
