#include "common/grpc_options.h"

#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "proto/ps_service.grpc.pb.h"

namespace pstrain {
namespace {

// A TCP port free on 127.0.0.1 at the time of the call.
int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr = {};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t size = sizeof(addr);
  EXPECT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  EXPECT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &size), 0);
  close(fd);
  return ntohs(addr.sin_port);
}

// How many of this process's Unix sockets have a send buffer of at least
// 4 MB (the kernel reports twice what was set).
int LargeUnixSockets() {
  int count = 0;
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return -1;
  while (dirent* entry = readdir(dir)) {
    const int fd = std::atoi(entry->d_name);
    struct stat st;
    if (fd <= 0 || fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode)) continue;
    int domain = 0, buffer = 0;
    socklen_t size = sizeof(int);
    if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &size) != 0 ||
        domain != AF_UNIX) {
      continue;
    }
    size = sizeof(int);
    if (getsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buffer, &size) == 0 &&
        buffer >= (4 << 20)) {
      ++count;
    }
  }
  closedir(dir);
  return count;
}

// A service with every method unimplemented: a call that reaches it ends
// UNIMPLEMENTED.
ParameterServer::CallbackService service;

// Whether a call over `channel` reaches the server.
bool Reaches(const std::shared_ptr<grpc::Channel>& channel) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::seconds(10));
  context.set_wait_for_ready(true);
  GetShardStatusRequest request;
  ShardStatus response;
  return ParameterServer::NewStub(channel)
             ->GetShardStatus(&context, request, &response)
             .error_code() == grpc::StatusCode::UNIMPLEMENTED;
}

TEST(IsLoopbackAddress, LoopbackHostsOnly) {
  EXPECT_TRUE(IsLoopbackAddress("127.0.0.1:5000"));
  EXPECT_TRUE(IsLoopbackAddress("127.3.2.1:5000"));
  EXPECT_TRUE(IsLoopbackAddress("[::1]:5000"));
  EXPECT_TRUE(IsLoopbackAddress("localhost:5000"));
  EXPECT_FALSE(IsLoopbackAddress("10.0.0.5:5000"));
  EXPECT_FALSE(IsLoopbackAddress("[fe80::1]:5000"));
  EXPECT_FALSE(IsLoopbackAddress("ps-0.trainer.svc:5000"));
  EXPECT_FALSE(IsLoopbackAddress("127.0.0.1"));
}

TEST(LocalSocketTarget, NamedAfterTheAddress) {
  EXPECT_EQ(LocalSocketTarget("127.0.0.1:5000"),
            "unix-abstract:pstrain/127.0.0.1:5000");
  EXPECT_EQ(LocalSocketTarget("localhost:5000"),
            "unix-abstract:pstrain/localhost:5000");
  EXPECT_EQ(LocalSocketTarget("[0::1]:5000"), "unix-abstract:pstrain/[::1]:5000");
  EXPECT_EQ(LocalSocketTarget("10.0.0.5:5000"), "");
}

TEST(LocalSocket, LoopbackServerAndChannelUseItWithLargeBuffers) {
  const std::string address = absl::StrCat("127.0.0.1:", FreePort());
  int port = 0;
  auto server = StartPstrainServer(address, {&service}, &port);
  ASSERT_TRUE(server.ok()) << server.status();
  const int before = LargeUnixSockets();
  auto channel = CreatePstrainChannel(address);
  ASSERT_TRUE(Reaches(channel));
  // The channel's end and the server's accepted end, both tuned by the
  // socket mutators gRPC called.
  EXPECT_GE(LargeUnixSockets(), before + 2);
  (*server)->Shutdown();
}

TEST(LocalSocket, ChannelFallsBackToTcpWithoutOne) {
  const std::string address = absl::StrCat("127.0.0.1:", FreePort());
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(address, grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_NE(server, nullptr);
  const int before = LargeUnixSockets();
  auto channel = CreatePstrainChannel(address);
  EXPECT_TRUE(Reaches(channel));
  EXPECT_EQ(LargeUnixSockets(), before);
  server->Shutdown();
}

TEST(LocalSocket, NoneWhenTurnedOff) {
  const std::string address = absl::StrCat("127.0.0.1:", FreePort());
  PstrainServerOptions options;
  options.local_socket = false;
  int port = 0;
  auto server =
      StartPstrainServer(address, {&service}, &port, GrpcSecurity(), options);
  ASSERT_TRUE(server.ok()) << server.status();
  // Nothing listens on the socket's name: a channel to it fails fast.
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::seconds(10));
  GetShardStatusRequest request;
  ShardStatus response;
  EXPECT_EQ(ParameterServer::NewStub(
                grpc::CreateChannel(LocalSocketTarget(address),
                                    grpc::InsecureChannelCredentials()))
                ->GetShardStatus(&context, request, &response)
                .error_code(),
            grpc::StatusCode::UNAVAILABLE);
  const int before = LargeUnixSockets();
  EXPECT_TRUE(Reaches(CreatePstrainChannel(address)));
  EXPECT_EQ(LargeUnixSockets(), before);
  (*server)->Shutdown();
}

TEST(LocalSocket, NoneForPortZero) {
  int port = 0;
  auto server = StartPstrainServer("127.0.0.1:0", {&service}, &port);
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_TRUE(Reaches(CreatePstrainChannel(absl::StrCat("127.0.0.1:", port))));
  (*server)->Shutdown();
}

}  // namespace
}  // namespace pstrain
