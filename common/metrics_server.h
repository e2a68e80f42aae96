// A minimal HTTP/1.1 server for Prometheus to scrape: answers GET /metrics
// with a MetricsRegistry's rendering, on its own thread over a POSIX socket.
//
//   PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<MetricsServer> server,
//                            MetricsServer::Start("0.0.0.0", 9090, &registry));
//   ... server->port() ...
//   server->Stop();  // or destroy it
//
// One connection at a time, each closed after its answer (Connection:
// close): a scraper polls every few seconds, and this keeps the server a
// single thread that never touches the training's threads. Other paths are
// 404, other methods 405, a request head over 8 KiB 431, a malformed one
// 400. A client that has not sent its whole request head within two
// seconds of connecting is dropped, and one that has not taken the whole
// answer within five more: however slowly it trickles bytes, no client
// holds the server longer.
#ifndef PSTRAIN_COMMON_METRICS_SERVER_H_
#define PSTRAIN_COMMON_METRICS_SERVER_H_

#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "common/metrics.h"

namespace pstrain {

class MetricsServer {
 public:
  // Listens on `host` (an IPv4 or IPv6 address, or a name resolved to one,
  // as the task's TF_CONFIG address; "0.0.0.0": every interface) and `port` (0:
  // one the system picks; see port()). `registry` must outlive the server.
  // Errors name the address.
  static absl::StatusOr<std::unique_ptr<MetricsServer>> Start(
      const std::string& host, int port, const MetricsRegistry* registry);
  ~MetricsServer();
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  // The port listened on.
  int port() const { return port_; }

  // Stops listening and returns once the thread is done (an answer being
  // written is finished first). Idempotent.
  void Stop();

 private:
  MetricsServer(const MetricsRegistry* registry, int listen_fd, int port,
                int wake_read, int wake_write);
  void Serve();
  // Reads one request from `fd`, answers it, and closes `fd`.
  void Answer(int fd);

  const MetricsRegistry* const registry_;
  const int listen_fd_;
  const int port_;
  // A pipe: a byte written to wake_write_ ends Serve.
  const int wake_read_;
  const int wake_write_;
  std::thread thread_;
};

// What a binary does with its --metrics_port flag: null for 0 (metrics
// off), else a server at `host` (the task's TF_CONFIG host, where its gRPC
// server listens too) and `port`, logging where it serves.
// INVALID_ARGUMENT naming the flag for a port outside [0, 65535];
// UNAVAILABLE when the port cannot be listened on.
absl::StatusOr<std::unique_ptr<MetricsServer>> ServeMetricsOnPort(
    const std::string& host, int port, const MetricsRegistry* registry,
    const std::string& process);

// The response to an HTTP request head (request line and headers, without
// the blank line), given how to render the metrics: exposed for tests.
std::string MetricsHttpResponse(const std::string& head,
                                const std::function<std::string()>& render);

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_METRICS_SERVER_H_
