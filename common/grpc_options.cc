#include "common/grpc_options.h"

#include <cstdlib>

#include "absl/strings/str_cat.h"

namespace pstrain {
namespace {

// Tuning for bulk tensor transfer; each value is an int channel argument.
struct Tuning {
  const char* name;
  int value;
};

const Tuning kTuning[] = {
    // Larger HTTP/2 frames: fewer frame headers and callbacks per MB.
    {GRPC_ARG_HTTP2_MAX_FRAME_SIZE, 1 << 20},
    // Read the socket in large pieces.
    {GRPC_ARG_TCP_READ_CHUNK_SIZE, 1 << 20},
    {GRPC_ARG_TCP_MIN_READ_CHUNK_SIZE, 256 << 10},
    {GRPC_ARG_TCP_MAX_READ_CHUNK_SIZE, 4 << 20},
    // A fixed flow-control window large enough for a whole chunk: on
    // loopback or a LAN the bandwidth-delay estimate keeps it tiny, and each
    // window update costs a round of thread wake-ups.
    {GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, 8 << 20},
    {GRPC_ARG_HTTP2_BDP_PROBE, 0},
};

template <typename Args>
void Apply(Args* args) {
  if (std::getenv("PSTRAIN_GRPC_NO_TUNING") != nullptr) return;
  for (const Tuning& t : kTuning) args->SetInt(t.name, t.value);
}

}  // namespace

std::shared_ptr<grpc::Channel> CreatePstrainChannel(
    const std::string& address, const GrpcSecurity& security) {
  grpc::ChannelArguments args;
  // A peer that is starting or restarting is retried within a second, not
  // after gRPC's default backoff of up to two minutes.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  args.SetMaxReceiveMessageSize(kMaxGrpcMessageBytes);
  args.SetMaxSendMessageSize(kMaxGrpcMessageBytes);
  Apply(&args);
  return grpc::experimental::CreateCustomChannelWithInterceptors(
      address, PstrainChannelCredentials(security), args,
      AuthTokenInterceptors(security));
}

void ConfigurePstrainServer(grpc::ServerBuilder* builder) {
  builder->SetMaxReceiveMessageSize(kMaxGrpcMessageBytes);
  builder->SetMaxSendMessageSize(kMaxGrpcMessageBytes);
  struct {
    grpc::ServerBuilder* builder;
    void SetInt(const char* name, int value) {
      builder->AddChannelArgument(name, value);
    }
  } server_args{builder};
  Apply(&server_args);
}

absl::StatusOr<std::unique_ptr<grpc::Server>> StartPstrainServer(
    const std::string& address, const std::vector<grpc::Service*>& services,
    int* bound_port, const GrpcSecurity& security) {
  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> credentials =
      PstrainServerCredentials(security);
  if (!credentials.ok()) return credentials.status();
  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  ConfigurePstrainServer(&builder);
  builder.AddListeningPort(address, *credentials, bound_port);
  for (grpc::Service* service : services) builder.RegisterService(service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || *bound_port == 0) {
    // gRPC also refuses to start on a certificate and key that do not
    // match; it logs why.
    return absl::UnavailableError(
        absl::StrCat("cannot listen on ", address,
                     security.tls() ? " (with --tls_cert and --tls_key)" : ""));
  }
  return server;
}

}  // namespace pstrain
