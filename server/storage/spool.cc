#include "server/storage/spool.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace tomo::server {
namespace {

namespace fs = std::filesystem;

absl::Status ErrnoStatus(int err, absl::string_view what, absl::string_view path) {
  absl::StatusCode code = absl::StatusCode::kInternal;
  if (err == ENOSPC || err == EDQUOT) code = absl::StatusCode::kResourceExhausted;
  if (err == EACCES || err == EPERM || err == EROFS) code = absl::StatusCode::kPermissionDenied;
  if (err == ENOENT) code = absl::StatusCode::kNotFound;
  if (err == EEXIST) code = absl::StatusCode::kAlreadyExists;
  return absl::Status(code, absl::StrCat("cannot ", what, " ", path, ": ", std::strerror(err)));
}

absl::Status FsStatus(const std::error_code& error, absl::string_view what,
                      absl::string_view path) {
  return ErrnoStatus(error.value(), what, path);
}

}  // namespace

absl::StatusOr<std::unique_ptr<Spool>> Spool::Open(const std::string& root) {
  if (root.empty()) {
    return absl::InvalidArgumentError("--spool_dir: must not be empty");
  }
  std::error_code error;
  const fs::path jobs = fs::path(root) / "jobs";
  fs::create_directories(jobs, error);
  if (error) return FsStatus(error, "create spool directory", jobs.string());

  // The lock is the kernel's flock on the spool directory itself, held through an open
  // descriptor for the daemon's life: removing or replacing tomod.lock cannot free it (a
  // lock on that file would be, since a second daemon would lock a new file of the same
  // name), and the kernel drops it when the process dies, however it dies.
  int dir_fd = ::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd < 0) return ErrnoStatus(errno, "open", root);
  const std::string lock_path = (fs::path(root) / "tomod.lock").string();
  if (::flock(dir_fd, LOCK_EX | LOCK_NB) != 0) {
    int err = errno;
    ::close(dir_fd);
    if (err == EWOULDBLOCK) {
      std::string holder;
      if (FILE* pid_file = std::fopen(lock_path.c_str(), "re"); pid_file != nullptr) {
        char line[32] = {};
        if (std::fgets(line, sizeof(line), pid_file) != nullptr) {
          holder = absl::StrCat(", pid ", absl::StripAsciiWhitespace(line));
        }
        std::fclose(pid_file);
      }
      return absl::FailedPreconditionError(absl::StrCat(
          "spool directory ", root, " is in use by another tomod (the directory is locked",
          holder, "); give each daemon its own --spool_dir"));
    }
    return ErrnoStatus(err, "lock", root);
  }
  // The pid, for people looking at the spool; the lock on the directory is what counts, so
  // a full disk that refuses these few bytes does not keep tomod from starting.
  int fd = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  std::string pid = absl::StrCat(::getpid(), "\n");
  if (fd >= 0) {
    if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, pid.data(), pid.size(), 0) < 0) {
      std::fprintf(stderr, "tomod: cannot write the pid to %s: %s\n", lock_path.c_str(),
                   std::strerror(errno));
    }
    ::close(fd);
  }
  fd = dir_fd;
  return std::unique_ptr<Spool>(new Spool(fs::absolute(root).lexically_normal().string(), fd));
}

Spool::~Spool() {
  if (lock_fd_ >= 0) ::close(lock_fd_);  // releases the flock
}

std::string Spool::JobDir(const std::string& id) const {
  return (fs::path(root_) / "jobs" / id).string();
}
std::string Spool::InputPath(const std::string& id) const {
  return (fs::path(JobDir(id)) / "input.bin").string();
}
std::string Spool::ResultsDir(const std::string& id) const {
  return (fs::path(JobDir(id)) / "results").string();
}
std::string Spool::ResultPath(const std::string& id, const std::string& name) const {
  return (fs::path(ResultsDir(id)) / name).string();
}

std::string Spool::ResultsPartialDir(const std::string& id) const {
  return (fs::path(JobDir(id)) / "results.partial").string();
}
std::string Spool::DatabasePath() const { return (fs::path(root_) / "tomod.db").string(); }

absl::Status Spool::CreateJobDir(const std::string& id) const {
  const std::string dir = JobDir(id);
  if (::mkdir(dir.c_str(), 0755) != 0) return ErrnoStatus(errno, "create", dir);
  return absl::OkStatus();
}

absl::Status Spool::RemoveJobDir(const std::string& id) const {
  std::error_code error;
  fs::remove_all(JobDir(id), error);
  if (error) return FsStatus(error, "remove", JobDir(id));
  return absl::OkStatus();
}

std::vector<std::string> Spool::ListJobDirs() const {
  std::vector<std::string> ids;
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(fs::path(root_) / "jobs", error)) {
    if (entry.is_directory()) ids.push_back(entry.path().filename().string());
  }
  return ids;
}

absl::Status Spool::SyncJobsDir() const {
  return FsyncDirectory((fs::path(root_) / "jobs").string());
}

uint64_t Spool::JobDiskBytes(const std::string& id) const {
  uint64_t bytes = 0;
  std::error_code error;
  for (fs::recursive_directory_iterator it(JobDir(id), error), end; !error && it != end;
       it.increment(error)) {
    std::error_code ignored;
    if (it->is_regular_file(ignored)) bytes += it->file_size(ignored);
  }
  return bytes;
}

absl::Status Spool::PublishResults(const std::string& id) const {
  const std::string from = ResultsPartialDir(id);
  const std::string to = ResultsDir(id);
  // rename() replaces an empty directory only; a leftover of an interrupted run goes first.
  std::error_code error;
  fs::remove_all(to, error);
  if (error) return FsStatus(error, "remove", to);
  // The files were fsynced as they were written; their names in the directory too.
  if (absl::Status synced = FsyncDirectory(from); !synced.ok()) return synced;
  if (::rename(from.c_str(), to.c_str()) != 0) return ErrnoStatus(errno, "rename to", to);
  return FsyncDirectory(JobDir(id));
}

absl::StatusOr<AppendFile> AppendFile::Create(const std::string& path) {
  // Readable too: an upload on tmpfs is written through a shared mapping (job_manager.cc).
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoStatus(errno, "create", path);
  return AppendFile(path, fd);
}

AppendFile::AppendFile(AppendFile&& other) noexcept
    : path_(std::move(other.path_)), fd_(std::exchange(other.fd_, -1)) {}

AppendFile& AppendFile::operator=(AppendFile&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    path_ = std::move(other.path_);
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

AppendFile::~AppendFile() {
  if (fd_ >= 0) ::close(fd_);
}

absl::Status AppendFile::Append(absl::string_view data) {
  if (fd_ < 0) return absl::FailedPreconditionError(absl::StrCat(path_, " is closed"));
  const char* p = data.data();
  size_t left = data.size();
  while (left > 0) {
    ssize_t n = ::write(fd_, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoStatus(errno, "write", path_);
    p += n;
    left -= static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

absl::Status AppendFile::Sync() {
  if (fd_ < 0) return absl::FailedPreconditionError(absl::StrCat(path_, " is closed"));
  if (::fsync(fd_) != 0) return ErrnoStatus(errno, "fsync", path_);
  return FsyncDirectory(fs::path(path_).parent_path().string());
}

absl::Status AppendFile::Close() {
  if (fd_ < 0) return absl::OkStatus();
  int fd = std::exchange(fd_, -1);
  if (::close(fd) != 0) return ErrnoStatus(errno, "close", path_);
  return absl::OkStatus();
}

absl::Status FsyncDirectory(const std::string& path) {
  int fd = ::open(path.empty() ? "." : path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus(errno, "open directory", path);
  int rc = ::fsync(fd);
  int err = errno;
  ::close(fd);
  if (rc != 0) return ErrnoStatus(err, "fsync directory", path);
  return absl::OkStatus();
}

absl::Status WriteFileAtomically(const std::string& path, absl::string_view contents) {
  const std::string temp = absl::StrCat(path, ".tmp.", ::getpid());
  ::unlink(temp.c_str());
  {
    absl::StatusOr<AppendFile> file = AppendFile::Create(temp);
    if (!file.ok()) return file.status();
    absl::Status status = file->Append(contents);
    if (status.ok()) status = file->Sync();
    if (status.ok()) status = file->Close();
    if (!status.ok()) {
      ::unlink(temp.c_str());
      return status;
    }
  }
  if (::rename(temp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(temp.c_str());
    return ErrnoStatus(err, "rename to", path);
  }
  return absl::OkStatus();
}

}  // namespace tomo::server
