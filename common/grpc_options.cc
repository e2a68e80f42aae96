#include "common/grpc_options.h"

#include <arpa/inet.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/host_port.h"
#include "grpc/support/sync.h"

namespace pstrain {
namespace {

// Tuning for bulk tensor transfer; each value is an int channel argument.
struct Tuning {
  const char* name;
  int value;
};

const Tuning kTuning[] = {
    // The largest HTTP/2 frames: fewer frame headers and callbacks per MB.
    // With reads of 4 MB (1 MB at least) rather than 1 MB (256 KB), this
    // gave bench/ps_throughput about 5% more than 1 MB frames at 40 MB.
    {GRPC_ARG_HTTP2_MAX_FRAME_SIZE, (16 << 20) - 1},
    // Read the socket in large pieces.
    {GRPC_ARG_TCP_READ_CHUNK_SIZE, 4 << 20},
    {GRPC_ARG_TCP_MIN_READ_CHUNK_SIZE, 1 << 20},
    {GRPC_ARG_TCP_MAX_READ_CHUNK_SIZE, 4 << 20},
    // Flow control is left to gRPC's BDP probing, which must stay on. In
    // gRPC 1.51 it is the only thing that ever raises the connection-level
    // window above HTTP/2's initial 64 KB: with memory pressure low it sets
    // both the connection and the stream windows to at least 4 MB from the
    // first exchange of settings, then pings rarely (the interval grows
    // from 50 ms). With probing off, GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES
    // enlarges only the stream windows: a 1 MB pull reply then stalled
    // about seven times on the 64 KB connection window, each stall a round
    // trip of thread wake-ups for a WINDOW_UPDATE (GRPC_TRACE=flowctl logs
    // "moved to stalled list by transport"), and pulls ran at half the
    // speed of pushes at 4 MB per round.
};

// How often a client pings a connection that has calls in flight.
constexpr int kKeepaliveMs = 5000;

template <typename Args>
void Apply(Args* args) {
  if (std::getenv("PSTRAIN_GRPC_NO_TUNING") != nullptr) return;
  for (const Tuning& t : kTuning) args->SetInt(t.name, t.value);
}

// Socket buffers of local-socket connections. A Unix stream socket holds
// no more than its sender's SO_SNDBUF in flight (Linux's default is 208 KB),
// so a default-sized one stops the sender and wakes the receiver every 208
// KB. 4 MB (Linux's usual wmem_max; the kernel doubles it) cut the system
// time of bench/ps_throughput by about a third and raised its throughput
// 1.3-1.6x; loopback TCP sockets, autotuned, gained nothing from it.
constexpr int kLocalSocketBufferBytes = 4 << 20;

// gRPC's socket mutator: gRPC calls it on each socket a channel connects or
// a server accepts. gRPC 1.51's public API takes one
// (ChannelArguments::SetSocketMutator, GRPC_ARG_SOCKET_MUTATOR) but Debian
// does not install the header defining it (src/core/lib/iomgr/
// socket_mutator.h), so its layout in 1.51 is spelled out here; the
// LocalSocket tests in grpc_options_test check that gRPC calls it.
enum class FdUsage : int { kClientConnection, kServerListener, kServerConnection };
struct MutateSocketInfo {
  int fd;
  FdUsage usage;
};
struct SocketMutatorVtable {
  bool (*mutate_fd)(int fd, grpc_socket_mutator* mutator);
  int (*compare)(grpc_socket_mutator* a, grpc_socket_mutator* b);
  void (*destroy)(grpc_socket_mutator* mutator);
  // Preferred to mutate_fd when set; the only one called on accepted sockets.
  bool (*mutate_fd_2)(const MutateSocketInfo* info, grpc_socket_mutator* mutator);
};
struct LocalSocketMutator {
  const SocketMutatorVtable* vtable;  // first, as gRPC expects
  gpr_refcount refcount;
};

// Enlarges the buffers of `fd` if it is a Unix socket (a server's mutator
// also sees its TCP connections, which keep the kernel's autotuning).
bool TuneLocalSocket(int fd) {
  int domain = 0;
  socklen_t size = sizeof(domain);
  if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &size) != 0 ||
      domain != AF_UNIX) {
    return true;
  }
  // Best effort: a smaller buffer only costs speed.
  setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &kLocalSocketBufferBytes,
             sizeof(kLocalSocketBufferBytes));
  setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &kLocalSocketBufferBytes,
             sizeof(kLocalSocketBufferBytes));
  return true;
}

const SocketMutatorVtable kLocalSocketMutatorVtable = {
    /*mutate_fd=*/[](int fd, grpc_socket_mutator*) { return TuneLocalSocket(fd); },
    // All of them do the same, so channels may share connections.
    /*compare=*/[](grpc_socket_mutator*, grpc_socket_mutator*) { return 0; },
    /*destroy=*/
    [](grpc_socket_mutator* m) {
      delete reinterpret_cast<LocalSocketMutator*>(m);
    },
    /*mutate_fd_2=*/
    [](const MutateSocketInfo* info, grpc_socket_mutator*) {
      return TuneLocalSocket(info->fd);
    },
};

// A new mutator holding one reference, which the channel arguments that
// receive it take over (they destroy it with its last reference).
grpc_socket_mutator* NewLocalSocketMutator() {
  LocalSocketMutator* m = new LocalSocketMutator;
  m->vtable = &kLocalSocketMutatorVtable;
  gpr_ref_init(&m->refcount, 1);
  return reinterpret_cast<grpc_socket_mutator*>(m);
}

// Gives a server under construction the local-socket mutator.
class LocalSocketOption : public grpc::ServerBuilderOption {
 public:
  void UpdateArguments(grpc::ChannelArguments* args) override {
    args->SetSocketMutator(NewLocalSocketMutator());
  }
  void UpdatePlugins(
      std::vector<std::unique_ptr<grpc::ServerBuilderPlugin>>*) override {}
};

// The abstract socket name (without its leading NUL) for loopback
// `address`, spelled as HostPort spells it, so that a server and its clients
// agree however the address was written.
std::string LocalSocketName(const HostPort& address) {
  return absl::StrCat("pstrain/", address.ToString());
}

// Whether a process listens on the abstract socket `name` now (a connection
// it would not accept at once counts as no).
bool LocalSocketListening(const std::string& name) {
  sockaddr_un addr;
  std::memset(&addr, 0, sizeof(addr));
  addr.sun_family = AF_UNIX;
  if (name.size() + 1 > sizeof(addr.sun_path)) return false;
  std::memcpy(addr.sun_path + 1, name.data(), name.size());
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return false;
  const bool connected =
      connect(fd, reinterpret_cast<const sockaddr*>(&addr),
              offsetof(sockaddr_un, sun_path) + 1 + name.size()) == 0;
  close(fd);
  return connected;
}

bool IsLoopbackHost(const std::string& host) {
  if (host == "localhost") return true;
  in_addr v4;
  if (inet_pton(AF_INET, host.c_str(), &v4) == 1) {
    return (ntohl(v4.s_addr) >> 24) == 127;
  }
  in6_addr v6;
  return inet_pton(AF_INET6, host.c_str(), &v6) == 1 &&
         IN6_IS_ADDR_LOOPBACK(&v6);
}

// The local socket's name for `address`, or "" if it is not loopback.
std::string LocalSocketNameFor(const std::string& address) {
  absl::StatusOr<HostPort> hp = ParseHostPort(address);
  if (!hp.ok() || !IsLoopbackHost(hp->host)) return "";
  return LocalSocketName(*hp);
}

}  // namespace

bool IsLoopbackAddress(const std::string& address) {
  absl::StatusOr<HostPort> hp = ParseHostPort(address);
  return hp.ok() && IsLoopbackHost(hp->host);
}

std::string LocalSocketTarget(const std::string& address) {
  const std::string name = LocalSocketNameFor(address);
  return name.empty() ? "" : absl::StrCat("unix-abstract:", name);
}

std::shared_ptr<grpc::Channel> CreatePstrainChannel(
    const std::string& address, const GrpcSecurity& security) {
  grpc::ChannelArguments args;
  std::string target = address;
  const std::string local = LocalSocketTarget(address);
  if (!local.empty() && LocalSocketListening(LocalSocketNameFor(address))) {
    target = local;
    // Calls and TLS name checks as over TCP to `address`.
    args.SetString(GRPC_ARG_DEFAULT_AUTHORITY, address);
    args.SetSocketMutator(NewLocalSocketMutator());
  }
  // A peer that is starting or restarting is retried within a second, not
  // after gRPC's default backoff of up to two minutes.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  // A connection that stalls (a partition drops packets and resets
  // nothing) is found dead by a ping within seconds and replaced, instead
  // of holding calls until TCP's retransmissions, backing off to tens of
  // seconds, get through after the network heals.
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, kKeepaliveMs);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 3000);
  args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  args.SetMaxReceiveMessageSize(kMaxGrpcMessageBytes);
  args.SetMaxSendMessageSize(kMaxGrpcMessageBytes);
  Apply(&args);
  return grpc::experimental::CreateCustomChannelWithInterceptors(
      target, PstrainChannelCredentials(security), args,
      AuthTokenInterceptors(security));
}

void ConfigurePstrainServer(grpc::ServerBuilder* builder) {
  builder->SetMaxReceiveMessageSize(kMaxGrpcMessageBytes);
  builder->SetMaxSendMessageSize(kMaxGrpcMessageBytes);
  // Accepts the clients' keepalive pings (gRPC's default would answer
  // pings more often than every 5 minutes with GOAWAY).
  builder->AddChannelArgument(
      GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, kKeepaliveMs / 2);
  builder->AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES, 0);
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
    int* bound_port, const GrpcSecurity& security,
    const PstrainServerOptions& options) {
  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> credentials =
      PstrainServerCredentials(security);
  if (!credentials.ok()) return credentials.status();
  // A process-wide setting, read when the server is built.
  grpc::EnableDefaultHealthCheckService(options.grpc_health);
  grpc::ServerBuilder builder;
  ConfigurePstrainServer(&builder);
  builder.AddListeningPort(address, *credentials, bound_port);
  // Same-host peers talk over the local socket (CreatePstrainChannel). With
  // port 0 the port, hence the socket's name, is not known yet.
  const std::string local = LocalSocketTarget(address);
  if (options.local_socket && !local.empty() &&
      !absl::EndsWith(address, ":0")) {
    builder.AddListeningPort(local, *credentials);
    builder.SetOption(std::make_unique<LocalSocketOption>());
  }
  for (grpc::Service* service : services) builder.RegisterService(service);
  if (options.register_more) options.register_more(&builder);
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
