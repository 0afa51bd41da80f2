#include "client/nearest_name.h"

#include "gtest/gtest.h"

namespace tomo::client {
namespace {

TEST(EditDistanceTest, CountsInsertionsDeletionsAndSubstitutions) {
  EXPECT_EQ(EditDistance("", ""), 0u);
  EXPECT_EQ(EditDistance("abc", ""), 3u);
  EXPECT_EQ(EditDistance("iteratons", "iterations"), 1u);
  EXPECT_EQ(EditDistance("kitten", "sitting"), 3u);
}

TEST(NearestNameTest, OffersOnlyCloseNames) {
  const std::vector<std::string> fields = {"iterations", "relaxation", "non_negative"};
  EXPECT_EQ(NearestName("iteratons", fields), "iterations");
  EXPECT_EQ(NearestName("Relaxtion", fields), "relaxation");
  EXPECT_EQ(NearestName("nonnegative", fields), "non_negative");
  EXPECT_FALSE(NearestName("kaczmarz", fields).has_value());
}

TEST(NearestNameTest, MatchesEnumNamesWithoutTheirPrefix) {
  const std::vector<std::string> shapes = {"DETECTOR_SHAPE_UNSPECIFIED", "DETECTOR_SHAPE_FLAT",
                                           "DETECTOR_SHAPE_CYLINDRICAL"};
  EXPECT_EQ(NearestName("FLAT", shapes, "DETECTOR_SHAPE_"), "DETECTOR_SHAPE_FLAT");
  EXPECT_EQ(NearestName("cylindric", shapes, "DETECTOR_SHAPE_"), "DETECTOR_SHAPE_CYLINDRICAL");
  EXPECT_FALSE(NearestName("FLAT", shapes).has_value()) << "no prefix given: too far";
}

}  // namespace
}  // namespace tomo::client
