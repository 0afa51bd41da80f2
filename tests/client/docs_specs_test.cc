// Every example JobSpec in docs/ is one that tomod accepts: each fenced ```json block of a
// docs/*.md page whose object has a "geometry", and each docs/**/*.json file, is read as a
// spec file is (client/job_spec_json.h), its sizes filled in as the commands fill them, and
// passed through tomod's validation with the default limits.
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "client/job_spec_json.h"
#include "client/job_spec_sizes.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "runner/job_spec.h"

namespace tomo::client {
namespace {

namespace fs = std::filesystem;

struct Example {
  std::string where;  // "docs/specs.md, block 2"
  std::string text;
};

std::string ReadText(const fs::path& path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// A spec is a JSON object with a geometry (other JSON blocks are sidecars and the like).
bool IsJobSpec(const std::string& text) {
  nlohmann::ordered_json document = nlohmann::ordered_json::parse(
      text, nullptr, /*allow_exceptions=*/false, /*ignore_comments=*/true);
  return document.is_object() && document.contains("geometry");
}

std::vector<Example> DocExamples() {
  std::vector<Example> examples;
  for (const fs::directory_entry& entry : fs::recursive_directory_iterator(TOMO_DOCS_DIR)) {
    const fs::path& path = entry.path();
    const std::string name = fs::relative(path, fs::path(TOMO_DOCS_DIR).parent_path()).string();
    if (path.extension() == ".json") {
      const std::string text = ReadText(path);
      if (IsJobSpec(text)) examples.push_back({name, text});
      continue;
    }
    if (path.extension() != ".md") continue;
    std::istringstream lines(ReadText(path));
    std::string line, block;
    bool in_json = false;
    int count = 0;
    while (std::getline(lines, line)) {
      if (!in_json && (line == "```json" || line == "```jsonc")) {
        in_json = true;
        block.clear();
      } else if (in_json && line.rfind("```", 0) == 0) {
        in_json = false;
        ++count;
        if (IsJobSpec(block)) {
          examples.push_back({name + ", json block " + std::to_string(count), block});
        }
      } else if (in_json) {
        block += line + "\n";
      }
    }
  }
  return examples;
}

TEST(DocsSpecsTest, EveryExampleSpecValidates) {
  const std::vector<Example> examples = DocExamples();
  // docs/specs.md holds three; fewer means the extraction broke.
  ASSERT_GE(examples.size(), 3u);
  for (const Example& example : examples) {
    SCOPED_TRACE(example.where);
    absl::StatusOr<tomoserve::v1::JobSpec> spec = JobSpecFromJson(example.text, example.where);
    ASSERT_TRUE(spec.ok()) << spec.status();
    FillImpliedInputSize(&*spec);
    absl::StatusOr<server::ValidatedJob> job =
        server::ValidateJobSpec(*spec, server::ServerLimits{});
    EXPECT_TRUE(job.ok()) << job.status();
  }
}

TEST(DocsSpecsTest, AWrongExampleWouldBeCaught) {
  // The check itself can fail: a spec with no volume is refused.
  absl::StatusOr<tomoserve::v1::JobSpec> spec = JobSpecFromJson(
      R"({"geometry": {"parallel2d": {"numDetectors": 8, "detectorSpacingMm": 1,
          "angles": {"uniform": {"count": 4, "spanDeg": 180}}}},
          "input": {"encoding": "DATA_ENCODING_FLOAT32_LE"}, "algorithm": {"fbp": {}}})");
  ASSERT_TRUE(spec.ok()) << spec.status();
  FillImpliedInputSize(&*spec);
  EXPECT_FALSE(server::ValidateJobSpec(*spec, server::ServerLimits{}).ok());
}

}  // namespace
}  // namespace tomo::client
