#include "server/security/secret_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace tomo::server {
namespace {

// Larger files are refused: a tokens file of this size holds ~10^5 tokens.
constexpr off_t kMaxSecretFileBytes = 16 << 20;

absl::Status ErrnoStatus(int error, const std::string& what) {
  const std::string message = absl::StrCat(what, ": ", std::strerror(error));
  if (error == ENOENT) return absl::NotFoundError(message);
  if (error == EACCES || error == EPERM) return absl::PermissionDeniedError(message);
  return absl::InternalError(message);
}

}  // namespace

absl::StatusOr<std::string> ReadSecretFile(absl::string_view flag, const std::string& path) {
  const std::string what = absl::StrCat(flag, "=", path);
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus(errno, what);
  struct stat info;
  if (fstat(fd, &info) != 0) {
    const int error = errno;
    close(fd);
    return ErrnoStatus(error, what);
  }
  if (!S_ISREG(info.st_mode)) {
    close(fd);
    return absl::FailedPreconditionError(absl::StrCat(what, ": not a regular file"));
  }
  const mode_t refused = S_IRWXO | S_IWGRP;
  if ((info.st_mode & refused) != 0) {
    close(fd);
    char mode[8];
    std::snprintf(mode, sizeof(mode), "%04o", static_cast<unsigned>(info.st_mode & 07777));
    return absl::FailedPreconditionError(absl::StrCat(
        what, ": mode ", mode,
        " lets other users read or change the tokens; allowed: read and write by the owner, "
        "read by the group (chmod 600 or 640)"));
  }
  if (info.st_size > kMaxSecretFileBytes) {
    close(fd);
    return absl::FailedPreconditionError(absl::StrCat(what, ": ", info.st_size,
                                                      " bytes is more than the most, ",
                                                      kMaxSecretFileBytes));
  }
  std::string text;
  char buffer[1 << 16];
  for (;;) {
    const ssize_t got = read(fd, buffer, sizeof(buffer));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      const int error = errno;
      close(fd);
      return ErrnoStatus(error, what);
    }
    if (got == 0) break;
    text.append(buffer, static_cast<size_t>(got));
    if (text.size() > static_cast<size_t>(kMaxSecretFileBytes)) {
      close(fd);
      return absl::FailedPreconditionError(
          absl::StrCat(what, ": more than ", kMaxSecretFileBytes, " bytes"));
    }
  }
  close(fd);
  return text;
}

}  // namespace tomo::server
