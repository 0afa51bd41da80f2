#include "client/json_fields_check.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tomoserve/v1/tomoserve.pb.h"

namespace tomo::client {
namespace {

using ::testing::HasSubstr;
using Json = nlohmann::ordered_json;

absl::Status Check(const char* text) {
  return CheckJsonFields(Json::parse(text), tomoserve::v1::JobSpec::descriptor());
}

TEST(JsonFieldsCheckTest, AcceptsProtoAndJsonNames) {
  EXPECT_TRUE(Check(R"({"geometry": {"parallel_2d": {"num_detectors": 5}}})").ok());
  EXPECT_TRUE(Check(R"({"geometry": {"parallel2d": {"numDetectors": 5}}})").ok());
  EXPECT_TRUE(Check(R"({"outputs": ["OUTPUT_FORMAT_NIFTI", 3]})").ok()) << "enums by number too";
}

TEST(JsonFieldsCheckTest, UnknownFieldNamesPathTypeAndNearestName) {
  absl::Status status = Check(R"({"algorithm": {"sirt": {"iteratons": 5}}})");
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()),
              HasSubstr("algorithm.sirt.iteratons: no field \"iteratons\" in "
                        "tomoserve.v1.IterativeOptions; did you mean \"iterations\"?"));
  // Deep in a repeated message.
  status = Check(R"({"geometry": {"vectors": {"views": [{}, {"sourse": {}}]}}})");
  EXPECT_THAT(std::string(status.message()),
              HasSubstr("geometry.vectors.views[1].sourse: no field \"sourse\" in "
                        "tomoserve.v1.ViewVectors; did you mean \"source\"?"));
  // Nothing near: the fields are listed.
  status = Check(R"({"algorithm": {"kaczmarz": {}}})");
  EXPECT_THAT(std::string(status.message()),
              HasSubstr("its fields: fbp, sirt, sart, os_sart, cgls, art, icd"));
}

TEST(JsonFieldsCheckTest, SartSuggestsTheSharedIterativeOptions) {
  absl::Status status = Check(R"({"algorithm": {"os_sart": {"relaxtion": 0.5}}})");
  EXPECT_THAT(std::string(status.message()), HasSubstr("did you mean \"relaxation\"?"));
}

TEST(JsonFieldsCheckTest, UnknownEnumNameListsTheAllowedOnes) {
  absl::Status status =
      Check(R"({"geometry": {"cone": {"detector": {"shape": "FLAT"}}}})");
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()),
              HasSubstr("geometry.cone.detector.shape: \"FLAT\" is not a "
                        "tomoserve.v1.DetectorShape; allowed: DETECTOR_SHAPE_UNSPECIFIED, "
                        "DETECTOR_SHAPE_FLAT, DETECTOR_SHAPE_CYLINDRICAL (did you mean "
                        "DETECTOR_SHAPE_FLAT?)"));
  status = Check(R"({"outputs": ["OUTPUT_FORMAT_RAW_FLOAT32", "nifty"]})");
  EXPECT_THAT(std::string(status.message()), HasSubstr("outputs[1]: \"nifty\" is not a"));
}

TEST(JsonFieldsCheckTest, RefusesANonObject) {
  EXPECT_EQ(CheckJsonFields(Json::parse("[1]"), tomoserve::v1::JobSpec::descriptor()).code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tomo::client
