#include "client/cli/joined_input.h"

#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"

namespace tomo::cli {

JoinedInput::~JoinedInput() {
  std::error_code ignored;
  if (!copy_.empty()) std::filesystem::remove(copy_, ignored);
}

absl::Status JoinedInput::Join(const std::vector<std::string>& paths,
                               const std::string& scratch_path) {
  if (paths.size() == 1) {
    path_ = paths.front();
    return absl::OkStatus();
  }
  copy_ = scratch_path;
  std::ofstream joined(copy_, std::ios::binary | std::ios::trunc);
  for (const std::string& path : paths) {
    std::ifstream part(path, std::ios::binary);
    joined << part.rdbuf();
  }
  joined.close();
  if (!joined) return absl::InternalError(absl::StrCat("cannot write ", copy_));
  path_ = copy_;
  return absl::OkStatus();
}

}  // namespace tomo::cli
