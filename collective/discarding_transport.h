// A RingTransport for tests whose right neighbour takes every send and
// answers nothing: a participant's own sends always succeed, so what it
// does is decided by what it receives (collective/ring_allreduce.h's Accept,
// Deliver and Close, called by the test).
#ifndef PSTRAIN_COLLECTIVE_DISCARDING_TRANSPORT_H_
#define PSTRAIN_COLLECTIVE_DISCARDING_TRANSPORT_H_

#include <memory>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "collective/ring_transport.h"

namespace pstrain {
namespace collective {

class DiscardingTransport : public RingTransport {
 public:
  std::unique_ptr<RingStream> NewStream() override {
    return std::make_unique<Stream>();
  }

 private:
  class Stream : public RingStream {
   public:
    absl::Status Start(const RingStreamHeader&) override {
      return absl::OkStatus();
    }
    absl::Status Write(int, int, absl::string_view) override {
      return absl::OkStatus();
    }
    absl::Status Finish(absl::string_view) override { return absl::OkStatus(); }
    void Cancel() override {}
  };
};

}  // namespace collective
}  // namespace pstrain

#endif  // PSTRAIN_COLLECTIVE_DISCARDING_TRANSPORT_H_
