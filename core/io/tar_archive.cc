#include "core/io/tar_archive.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <utility>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "core/base/status_macros.h"
#include "core/io/durable_file.h"

namespace tomo::core {
namespace {

constexpr size_t kBlock = 512;
constexpr size_t kNameBytes = 100;

// ustar header field offsets and sizes.
constexpr size_t kName = 0, kMode = 100, kUid = 108, kGid = 116, kSize = 124, kMtime = 136,
                 kChecksum = 148, kType = 156, kMagic = 257, kVersion = 263;

absl::Status CheckName(absl::string_view name, absl::string_view archive) {
  const auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat(archive, ": entry \"", name, "\" ", why));
  };
  if (name.empty() || name.size() > kNameBytes) return bad("must be 1 to 100 bytes long");
  if (name.front() == '/') return bad("is an absolute path");
  for (absl::string_view part : absl::StrSplit(name, '/')) {
    if (part.empty() || part == "." || part == "..") {
      return bad("has an empty, \".\" or \"..\" component");
    }
  }
  return absl::OkStatus();
}

void PutOctal(char* field, size_t width, uint64_t value) {
  // width - 1 octal digits and a NUL.
  const std::string text = absl::StrFormat("%0*o", static_cast<int>(width - 1), value);
  std::memcpy(field, text.data(), width - 1);
  field[width - 1] = '\0';
}

unsigned HeaderChecksum(const char* header) {
  unsigned sum = 0;
  for (size_t i = 0; i < kBlock; ++i) {
    const bool in_field = i >= kChecksum && i < kChecksum + 8;
    sum += in_field ? ' ' : static_cast<unsigned char>(header[i]);
  }
  return sum;
}

absl::StatusOr<uint64_t> ReadOctal(const char* field, size_t width, absl::string_view what) {
  uint64_t value = 0;
  size_t i = 0;
  while (i < width && field[i] == ' ') ++i;
  bool digits = false;
  for (; i < width && field[i] >= '0' && field[i] <= '7'; ++i) {
    value = value * 8 + static_cast<uint64_t>(field[i] - '0');
    digits = true;
  }
  if (!digits) return absl::InvalidArgumentError(absl::StrCat(what, " is not an octal number"));
  return value;
}

}  // namespace

TarWriter::~TarWriter() {
  if (file_ != nullptr) {
    file_.reset();
    std::remove(temporary_.c_str());
  }
}

absl::Status TarWriter::Open(const std::string& path) {
  path_ = path;
  temporary_ = TemporaryPathFor(path);
  file_.reset(std::fopen(temporary_.c_str(), "wb"));
  if (file_ == nullptr) {
    return absl::ErrnoToStatus(errno, absl::StrCat("cannot create ", temporary_));
  }
  return absl::OkStatus();
}

absl::Status TarWriter::AddFile(const std::string& name, absl::string_view bytes) {
  if (file_ == nullptr) return absl::FailedPreconditionError("TarWriter: not open");
  TOMO_RETURN_IF_ERROR(CheckName(name, path_));
  char header[kBlock] = {};
  std::memcpy(header + kName, name.data(), name.size());
  PutOctal(header + kMode, 8, 0644);
  PutOctal(header + kUid, 8, 0);
  PutOctal(header + kGid, 8, 0);
  PutOctal(header + kSize, 12, bytes.size());
  PutOctal(header + kMtime, 12, 0);
  header[kType] = '0';
  std::memcpy(header + kMagic, "ustar", 6);  // with its NUL
  std::memcpy(header + kVersion, "00", 2);
  const std::string checksum = absl::StrFormat("%06o", HeaderChecksum(header));
  std::memcpy(header + kChecksum, checksum.data(), 6);
  header[kChecksum + 6] = '\0';
  header[kChecksum + 7] = ' ';
  const char padding[kBlock] = {};
  const size_t pad = (kBlock - bytes.size() % kBlock) % kBlock;
  if (std::fwrite(header, 1, kBlock, file_.get()) != kBlock ||
      std::fwrite(bytes.data(), 1, bytes.size(), file_.get()) != bytes.size() ||
      std::fwrite(padding, 1, pad, file_.get()) != pad) {
    return absl::ErrnoToStatus(errno, absl::StrCat("cannot write ", temporary_));
  }
  return absl::OkStatus();
}

absl::Status TarWriter::Finish() {
  if (file_ == nullptr) return absl::FailedPreconditionError("TarWriter: not open");
  const char end[2 * kBlock] = {};
  const bool written = std::fwrite(end, 1, sizeof(end), file_.get()) == sizeof(end) &&
                       std::fflush(file_.get()) == 0;
  const int error = errno;
  const bool closed = std::fclose(file_.release()) == 0;
  if (!written || !closed) {
    std::remove(temporary_.c_str());
    return absl::ErrnoToStatus(written ? errno : error, absl::StrCat("cannot write ", temporary_));
  }
  return SyncAndRename(temporary_, path_);
}

absl::Status ForEachTarEntry(
    std::istream& in, const std::string& archive,
    const std::function<absl::Status(const std::string& name, std::string bytes)>& on_entry) {
  // What is left of the stream, so that a header's size is checked before any allocation.
  const std::streampos here = in.tellg();
  in.seekg(0, std::ios::end);
  const std::streampos stream_end = in.tellg();
  in.seekg(here);
  if (here < 0 || stream_end < 0 || !in) {
    return absl::InvalidArgumentError(absl::StrCat(archive, ": cannot be read as a tar stream"));
  }
  char header[kBlock];
  while (true) {
    in.read(header, kBlock);
    if (in.gcount() != static_cast<std::streamsize>(kBlock)) {
      return absl::InvalidArgumentError(
          absl::StrCat(archive, ": truncated (no end-of-archive blocks)"));
    }
    if (std::all_of(header, header + kBlock, [](char c) { return c == 0; })) break;
    const std::string name(header + kName, strnlen(header + kName, kNameBytes));
    TOMO_ASSIGN_OR_RETURN(uint64_t checksum,
                          ReadOctal(header + kChecksum, 8, absl::StrCat(archive, ": checksum")));
    if (checksum != HeaderChecksum(header)) {
      return absl::InvalidArgumentError(
          absl::StrCat(archive, ": header of entry \"", name, "\" fails its checksum"));
    }
    if (header[kType] != '0' && header[kType] != '\0') {
      return absl::InvalidArgumentError(absl::StrCat(archive, ": entry \"", name,
                                                     "\" is not a regular file (type '",
                                                     std::string(1, header[kType]), "')"));
    }
    TOMO_RETURN_IF_ERROR(CheckName(name, archive));
    TOMO_ASSIGN_OR_RETURN(uint64_t size,
                          ReadOctal(header + kSize, 12, absl::StrCat(archive, ": size of ", name)));
    const uint64_t left = static_cast<uint64_t>(stream_end - in.tellg());
    if (size > left) {
      return absl::InvalidArgumentError(absl::StrCat(archive, ": entry \"", name, "\" of ", size,
                                                     " bytes is truncated (", left, " left)"));
    }
    std::string bytes(size, '\0');
    in.read(bytes.data(), static_cast<std::streamsize>(size));
    if (static_cast<uint64_t>(in.gcount()) != size) {
      return absl::InvalidArgumentError(
          absl::StrCat(archive, ": entry \"", name, "\" is truncated"));
    }
    in.ignore(static_cast<std::streamsize>((kBlock - size % kBlock) % kBlock));
    TOMO_RETURN_IF_ERROR(on_entry(name, std::move(bytes)));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> ExtractTar(const std::string& tar_path,
                                                    const std::string& directory) {
  std::ifstream in(tar_path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open ", tar_path));
  std::vector<std::string> paths;
  TOMO_RETURN_IF_ERROR(ForEachTarEntry(
      in, tar_path, [&](const std::string& name, std::string bytes) -> absl::Status {
        const std::filesystem::path path = std::filesystem::path(directory) / name;
        std::error_code error;
        std::filesystem::create_directories(path.parent_path(), error);
        if (error) {
          return absl::InternalError(absl::StrCat("cannot create ", path.parent_path().string(),
                                                  ": ", error.message()));
        }
        TOMO_RETURN_IF_ERROR(WriteFileDurably(path.string(), bytes));
        paths.push_back(path.string());
        return absl::OkStatus();
      }));
  return paths;
}

}  // namespace tomo::core
