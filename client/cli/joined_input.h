// One input file for the job runner from the data files given on the command line: several
// files are one input, back to back, as tomod's spool holds them (`tomo local`, `tomo cor`).
#ifndef TOMO_CLIENT_CLI_JOINED_INPUT_H_
#define TOMO_CLIENT_CLI_JOINED_INPUT_H_

#include <string>
#include <vector>

#include "absl/status/status.h"

namespace tomo::cli {

class JoinedInput {
 public:
  JoinedInput() = default;
  JoinedInput(const JoinedInput&) = delete;
  JoinedInput& operator=(const JoinedInput&) = delete;
  // Removes the joined copy, if one was written.
  ~JoinedInput();

  // paths must not be empty. One path is used as it is; several are copied, in order, into
  // scratch_path. Fails naming scratch_path when it cannot be written.
  absl::Status Join(const std::vector<std::string>& paths, const std::string& scratch_path);

  // The file to read: the single path, or the joined copy.
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::string copy_;  // the joined copy, removed with this object; empty when none
};

}  // namespace tomo::cli

#endif  // TOMO_CLIENT_CLI_JOINED_INPUT_H_
