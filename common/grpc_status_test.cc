#include "common/grpc_status.h"

#include <memory>
#include <string>

#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/ps_service.grpc.pb.h"

namespace pstrain {
namespace {

TEST(GrpcStatus, OkMapsToOk) {
  EXPECT_TRUE(ToGrpcStatus(absl::OkStatus()).ok());
  EXPECT_TRUE(FromGrpcStatus(grpc::Status::OK).ok());
}

TEST(GrpcStatus, EveryCanonicalCodeRoundTrips) {
  for (int code = 1; code <= 16; ++code) {
    const absl::Status original(static_cast<absl::StatusCode>(code),
                                "variable dense/kernel: shape mismatch");
    const grpc::Status wire = ToGrpcStatus(original);
    EXPECT_EQ(static_cast<int>(wire.error_code()), code);
    EXPECT_EQ(wire.error_message(), "variable dense/kernel: shape mismatch");
    EXPECT_EQ(FromGrpcStatus(wire), original) << "code " << code;
  }
}

TEST(GrpcStatus, PayloadsRoundTrip) {
  absl::Status original = absl::FailedPreconditionError("too stale");
  original.SetPayload("type.pstrain/a", absl::Cord("first"));
  original.SetPayload("type.pstrain/b", absl::Cord());
  const grpc::Status wire = ToGrpcStatus(original);
  EXPECT_FALSE(wire.error_details().empty());
  const absl::Status back = FromGrpcStatus(wire);
  EXPECT_EQ(back, original);
  EXPECT_EQ(back.GetPayload("type.pstrain/a"), absl::Cord("first"));
  EXPECT_TRUE(back.GetPayload("type.pstrain/b").has_value());
  // Without payloads nothing goes into error_details.
  EXPECT_TRUE(
      ToGrpcStatus(absl::FailedPreconditionError("x")).error_details().empty());
}

TEST(GrpcStatus, DetailsThatAreNotPayloadsAreIgnored) {
  const absl::Status status = FromGrpcStatus(
      grpc::Status(grpc::StatusCode::ABORTED, "odd", "\xff\xff not a proto"));
  EXPECT_EQ(status, absl::AbortedError("odd"));
}

TEST(GrpcStatus, UnknownCodeBecomesUnknownWithNumber) {
  // 20: no code of gRPC's, but a value grpc::StatusCode can hold (its
  // enumerators, -1 to 16, give it the values -32 to 31).
  const absl::Status status =
      FromGrpcStatus(grpc::Status(static_cast<grpc::StatusCode>(20), "odd"));
  EXPECT_EQ(status.code(), absl::StatusCode::kUnknown);
  EXPECT_EQ(status.message(), "gRPC status code 20: odd");
}

// A ps service that refuses every status request the way the real ps refuses
// a request from another run.
class RefusingPs final : public ParameterServer::Service {
  grpc::Status GetShardStatus(grpc::ServerContext*,
                              const GetShardStatusRequest* request,
                              ShardStatus*) override {
    absl::Status refusal = absl::FailedPreconditionError(
        "run id '" + request->header().run_id() + "' is not this run's 'r1'");
    refusal.SetPayload("type.pstrain/test.OtherRun", absl::Cord("r1"));
    return ToGrpcStatus(refusal);
  }
};

TEST(GrpcStatus, StatusSurvivesARealGrpcCall) {
  RefusingPs service;
  int port = 0;
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                           &port);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_NE(server, nullptr);
  ASSERT_GT(port, 0);

  auto stub = ParameterServer::NewStub(grpc::CreateChannel(
      "127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials()));
  GetShardStatusRequest request;
  request.mutable_header()->set_run_id("old-run");
  ShardStatus response;
  grpc::ClientContext context;
  const absl::Status status =
      FromGrpcStatus(stub->GetShardStatus(&context, request, &response));
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(status.message(), "run id 'old-run' is not this run's 'r1'");
  EXPECT_EQ(status.GetPayload("type.pstrain/test.OtherRun"), absl::Cord("r1"));
  server->Shutdown();
}

}  // namespace
}  // namespace pstrain
