// A JobSpec as a commented JSON file (`tomo spec`): the file shape of client/job_spec_json.h
// (which reads `//` comments back), with
//   - `header` lines first, each as a `//` comment (what the spec is, the sizes it implies);
//   - after each value a comment saying its unit, range or meaning, where there is one to
//     say; for every enum the allowed names;
//   - small objects of numbers (vectors, sizes) and lists of numbers on one line.
//
//   std::cout << CommentedSpecJson(spec, {"cone beam, 360 views", "input: 12.3 MiB"});
#pragma once

#include <string>
#include <vector>

#include "tomoserve/v1/tomoserve.pb.h"

namespace tomo::cli {

std::string CommentedSpecJson(const tomoserve::v1::JobSpec& spec,
                              const std::vector<std::string>& header);

}  // namespace tomo::cli
