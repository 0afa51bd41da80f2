#include "client/server_address.h"

#include "gtest/gtest.h"

namespace tomo::client {
namespace {

std::string Target(const char* address) {
  absl::StatusOr<std::string> target = ServerTarget(address);
  return target.ok() ? *target : "error: " + std::string(target.status().message());
}

TEST(ServerTargetTest, AddsTheDefaultPort) {
  EXPECT_EQ(Target("localhost"), "localhost:50051");
  EXPECT_EQ(Target("10.1.2.3"), "10.1.2.3:50051");
  EXPECT_EQ(Target("[::1]"), "[::1]:50051");
  EXPECT_EQ(Target(" gpu-box.lab "), "gpu-box.lab:50051");
}

TEST(ServerTargetTest, KeepsAGivenPort) {
  EXPECT_EQ(Target("localhost:7001"), "localhost:7001");
  EXPECT_EQ(Target("[::1]:7001"), "[::1]:7001");
}

TEST(ServerTargetTest, DropsHttpAndGrpcSchemes) {
  EXPECT_EQ(Target("http://gpu-box:7001"), "gpu-box:7001");
  EXPECT_EQ(Target("HTTP://gpu-box/"), "gpu-box:50051");
  EXPECT_EQ(Target("grpc://gpu-box"), "gpu-box:50051");
}

TEST(ServerTargetTest, KeepsGrpcTargetForms) {
  EXPECT_EQ(Target("unix:/run/tomod.sock"), "unix:/run/tomod.sock");
  EXPECT_EQ(Target("dns:///gpu-box:7001"), "dns:///gpu-box:7001");
}

TEST(ServerTargetTest, RefusesWhatCannotBeAnAddress) {
  for (const char* bad : {"", "   ", "http://", "host:0", "host:65536", "host:http", "::1",
                          "[::1", "host/path", "https://gpu-box", ":50051"}) {
    absl::StatusOr<std::string> target = ServerTarget(bad);
    EXPECT_EQ(target.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    if (!target.ok()) {
      EXPECT_NE(target.status().message().find("server address"), absl::string_view::npos);
    }
  }
}

}  // namespace
}  // namespace tomo::client
