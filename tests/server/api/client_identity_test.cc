#include "server/api/client_identity.h"

#include "gtest/gtest.h"

namespace tomo::server {
namespace {

TEST(ClientFromPeerTest, HostOfTheAddressWithoutThePort) {
  EXPECT_EQ(ClientFromPeer("ipv4:127.0.0.1:53912"), "127.0.0.1");
  EXPECT_EQ(ClientFromPeer("ipv4:10.1.2.3:1"), "10.1.2.3");
  EXPECT_EQ(ClientFromPeer("ipv6:[::1]:53912"), "::1");
  EXPECT_EQ(ClientFromPeer("ipv6:[fe80::1%25eth0]:80"), "fe80::1%25eth0");
  EXPECT_EQ(ClientFromPeer("unix:/run/tomod.sock"), "unix");
  EXPECT_EQ(ClientFromPeer("unix:"), "unix");
  EXPECT_EQ(ClientFromPeer("unix-abstract:tomod"), "unix");
  // Unknown forms are kept whole rather than guessed at.
  EXPECT_EQ(ClientFromPeer("vsock:3:5000"), "vsock:3:5000");
  EXPECT_EQ(ClientFromPeer("ipv4:nonsense"), "nonsense");
}

}  // namespace
}  // namespace tomo::server
