#include "client/algorithm_options_shape.h"

#include "client/job_spec_json.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tomo::client {
namespace {

using ::testing::HasSubstr;
using Json = nlohmann::ordered_json;
namespace v1 = ::tomoserve::v1;

TEST(AlgorithmOptionsShapeTest, FlatAndOlderNestedFormsReadAlike) {
  absl::StatusOr<v1::JobSpec> flat = JobSpecFromJson(
      R"({"algorithm": {"os_sart": {"iterations": 7, "relaxation": 0.25, "blocks": 4,
                                    "order": "VIEW_ORDER_INTERLEAVED"}}})");
  ASSERT_TRUE(flat.ok()) << flat.status();
  absl::StatusOr<v1::JobSpec> nested = JobSpecFromJson(
      R"({"algorithm": {"osSart": {"iterative": {"iterations": 7, "relaxation": 0.25},
                                   "blocks": 4, "order": "VIEW_ORDER_INTERLEAVED"}}})");
  ASSERT_TRUE(nested.ok()) << nested.status();
  EXPECT_EQ(flat->algorithm().os_sart().iterative().iterations(), 7u);
  EXPECT_EQ(flat->algorithm().os_sart().iterative().relaxation(), 0.25);
  EXPECT_EQ(flat->algorithm().os_sart().blocks(), 4u);
  EXPECT_EQ(flat->SerializeAsString(), nested->SerializeAsString());

  absl::StatusOr<v1::JobSpec> sart =
      JobSpecFromJson(R"({"algorithm": {"sart": {"iterations": 3, "nonNegative": true}}})");
  ASSERT_TRUE(sart.ok()) << sart.status();
  EXPECT_EQ(sart->algorithm().sart().iterative().iterations(), 3u);
  EXPECT_TRUE(sart->algorithm().sart().iterative().non_negative());
}

TEST(AlgorithmOptionsShapeTest, BothFormsAtOnceAreRefused) {
  absl::StatusOr<v1::JobSpec> both = JobSpecFromJson(
      R"({"algorithm": {"sart": {"iterations": 3, "iterative": {"relaxation": 0.5}}}})", "j");
  EXPECT_EQ(both.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(both.status().message()), HasSubstr("j: algorithm.sart: iterations"));
}

TEST(AlgorithmOptionsShapeTest, FilesAreWrittenFlatAndReadBack) {
  v1::JobSpec spec;
  v1::OsSartOptions* os_sart = spec.mutable_algorithm()->mutable_os_sart();
  os_sart->mutable_iterative()->set_iterations(12);
  os_sart->set_blocks(6);
  const std::string text = JobSpecToJson(spec);
  Json document = Json::parse(text);
  EXPECT_EQ(document["algorithm"]["osSart"]["iterations"], 12) << text;
  EXPECT_FALSE(document["algorithm"]["osSart"].contains("iterative")) << text;
  absl::StatusOr<v1::JobSpec> read = JobSpecFromJson(text);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->SerializeAsString(), spec.SerializeAsString());
}

TEST(AlgorithmOptionsShapeTest, CommentsAreAllowedAndSyntaxErrorsSayWhere) {
  absl::StatusOr<v1::JobSpec> commented = JobSpecFromJson(
      "{\n  // the job's name\n  \"name\": \"a\", /* block */ \"priority\": 2\n}\n");
  ASSERT_TRUE(commented.ok()) << commented.status();
  EXPECT_EQ(commented->priority(), 2);
  absl::StatusOr<v1::JobSpec> broken = JobSpecFromJson("{\n \"priority\": \n", "job.json");
  EXPECT_THAT(std::string(broken.status().message()),
              HasSubstr("job.json: not valid JSON: parse error at line 3"));
}

}  // namespace
}  // namespace tomo::client
