// Uncompressed POSIX (ustar) tar archives of regular files: how a result made of several
// files (a DICOM series, one file per slice) travels as one result file with one CRC-32,
// and what `tar xf` or `tomo fetch --format dicom` unpacks again. No library needed.
//
//   TarWriter tar;
//   TOMO_RETURN_IF_ERROR(tar.Open("/results/volume_dicom.tar"));   // a temporary name first
//   TOMO_RETURN_IF_ERROR(tar.AddFile("volume_dicom/CT00001.dcm", bytes));
//   TOMO_RETURN_IF_ERROR(tar.Finish());   // end blocks, fsync, rename into place
//
//   TOMO_ASSIGN_OR_RETURN(std::vector<std::string> paths, ExtractTar(tar_path, "out"));
//
// Names: relative, at most 100 bytes (ustar's name field; no prefix split), no "..", no
// empty component. Errors: INVALID_ARGUMENT naming the archive and the entry for a name or
// an archive that breaks these rules (a bad header checksum, a truncated entry, a link or
// device entry, an absolute or escaping path); the errno's code naming the path when a
// file cannot be read or written. TarWriter is not thread-safe; ExtractTar is.
#pragma once

#include <cstdio>
#include <functional>
#include <istream>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tomo::core {

class TarWriter {
 public:
  TarWriter() = default;
  ~TarWriter();  // an unfinished archive's temporary file is removed
  TarWriter(const TarWriter&) = delete;
  TarWriter& operator=(const TarWriter&) = delete;

  absl::Status Open(const std::string& path);
  absl::Status AddFile(const std::string& name, absl::string_view bytes);
  absl::Status Finish();

 private:
  struct FileCloser {
    void operator()(std::FILE* file) const { std::fclose(file); }
  };
  std::string path_, temporary_;
  std::unique_ptr<std::FILE, FileCloser> file_;
};

// Calls on_entry with each regular file of the archive read from `in` (a seekable stream:
// each entry's size is checked against what is left before it is read), stopping at the
// end-of-archive block or at the first error, its own or on_entry's. archive names the
// stream in errors. The parser ExtractTar uses (and the fuzz target tar_archive_fuzz).
absl::Status ForEachTarEntry(
    std::istream& in, const std::string& archive,
    const std::function<absl::Status(const std::string& name, std::string bytes)>& on_entry);

// Unpacks every regular file of the archive under directory (created, as are the entries'
// folders); returns the paths written, in archive order.
absl::StatusOr<std::vector<std::string>> ExtractTar(const std::string& tar_path,
                                                    const std::string& directory);

}  // namespace tomo::core
