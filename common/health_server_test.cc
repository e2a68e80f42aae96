#include "common/health_server.h"

#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/grpc_options.h"
#include "common/grpc_status.h"
#include "grpcpp/impl/client_unary_call.h"
#include "grpcpp/support/sync_stream.h"
#include "gtest/gtest.h"
#include "proto/health.pb.h"

namespace pstrain {
namespace {

// A unary call of `method` with the serialized `request`, on a new
// connection (as each Kubernetes probe makes), with a deadline of 5 s: the
// kubelet allows 1 s; CI machines are slower and busier.
absl::Status Ask(const std::string& address, const std::string& method,
                 const std::string& request, std::string* reply) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);  // a connection of its own
  auto channel = grpc::CreateCustomChannel(
      address, grpc::InsecureChannelCredentials(), args);
  const grpc::internal::RpcMethod rpc(
      method.c_str(), grpc::internal::RpcMethod::NORMAL_RPC, channel);
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(5)));
  grpc::Slice bytes(request);
  grpc::ByteBuffer request_buffer(&bytes, 1), reply_buffer;
  const absl::Status status = FromGrpcStatus(
      grpc::internal::BlockingUnaryCall<grpc::ByteBuffer, grpc::ByteBuffer>(
          channel.get(), rpc, &context, request_buffer, &reply_buffer));
  std::vector<grpc::Slice> slices;
  if (status.ok() && reply_buffer.Dump(&slices).ok()) {
    for (const grpc::Slice& s : slices) {
      reply->append(reinterpret_cast<const char*>(s.begin()), s.size());
    }
  }
  return status;
}

TEST(HealthServer, AnswersTheHealthCheckAndNothingElse) {
  int port = 0;
  absl::StatusOr<std::unique_ptr<HealthServer>> server =
      HealthServer::Start("127.0.0.1:0", &port);
  ASSERT_TRUE(server.ok()) << server.status();
  const std::string address = absl::StrCat("127.0.0.1:", port);
  const std::string check = "/grpc.health.v1.Health/Check";

  for (int i = 0; i < 3; ++i) {  // each on a new connection
    std::string reply;
    const absl::Status status =
        Ask(address, check, HealthCheckRequest().SerializeAsString(), &reply);
    ASSERT_TRUE(status.ok()) << status;
    HealthCheckResponse response;
    ASSERT_TRUE(response.ParseFromString(reply));
    EXPECT_EQ(response.status(), HealthCheckResponse::SERVING);
  }

  HealthCheckRequest other;
  other.set_service("pstrain.ParameterServer");
  std::string reply;
  absl::Status status = Ask(address, check, other.SerializeAsString(), &reply);
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound) << status;
  status = Ask(address, check, "not a message", &reply);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  status = Ask(address, "/pstrain.ParameterServer/GetShardStatus", "", &reply);
  EXPECT_EQ(status.code(), absl::StatusCode::kUnimplemented) << status;
}

TEST(HealthServer, StopsWithACallInFlight) {
  int port = 0;
  absl::StatusOr<std::unique_ptr<HealthServer>> server =
      HealthServer::Start("127.0.0.1:0", &port);
  ASSERT_TRUE(server.ok()) << server.status();
  // A stream that never half-closes: its call stays open until the server
  // goes.
  auto channel = CreatePstrainChannel(absl::StrCat("127.0.0.1:", port));
  const grpc::internal::RpcMethod rpc("/grpc.health.v1.Health/Check",
                                      grpc::internal::RpcMethod::BIDI_STREAMING,
                                      channel);
  grpc::ClientContext context;
  std::unique_ptr<grpc::ClientReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer>>
      stream(grpc::internal::ClientReaderWriterFactory<
             grpc::ByteBuffer, grpc::ByteBuffer>::Create(channel.get(), rpc,
                                                         &context));
  grpc::Slice empty{std::string()};
  ASSERT_TRUE(stream->Write(grpc::ByteBuffer(&empty, 1)));
  server->reset();
  grpc::ByteBuffer reply;
  EXPECT_FALSE(stream->Read(&reply));
  EXPECT_FALSE(stream->Finish().ok());
}

}  // namespace
}  // namespace pstrain
