// A whole regular file mapped read-only, for the readers that decode files from memory (the
// DICOM-CT-PD and TIFF readers, tomod's spooled input): no copy into the heap, and the
// pages come from the page cache as they are touched. Unmapped on destruction; move-only.
//
//   TOMO_ASSIGN_OR_RETURN(MappedFile file, MappedFile::Open("/spool/jobs/7/input.bin"));
//   Decode(file.data(), file.size());
#pragma once

#include <cstddef>
#include <string>
#include <utility>

#include "absl/status/statusor.h"

namespace tomo::core {

class MappedFile {
 public:
  // NOT_FOUND when the file cannot be opened, INVALID_ARGUMENT when it is not a regular
  // file, the errno's code when it cannot be mapped; each naming the path.
  static absl::StatusOr<MappedFile> Open(const std::string& path);

  MappedFile(MappedFile&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  // The file's bytes; a valid (non-null) pointer also for an empty file.
  const unsigned char* data() const;
  size_t size() const { return size_; }

 private:
  MappedFile() = default;
  void* data_ = nullptr;  // null for an empty file
  size_t size_ = 0;
};

}  // namespace tomo::core
