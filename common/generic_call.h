// One call of an async generic gRPC service (grpc::AsyncGenericService),
// from gRPC's match to its status: the completion-queue state machine that
// the ps's service (ps/ps_service.h) and the worker's health server
// (common/health_server.h) share. A subclass says what to do at each step;
// this class reads the request messages, writes the replies and the status,
// and deletes the call once gRPC is done with it.
//
//   class MyServer::Call : public GenericCall {
//    public:
//     explicit Call(MyServer* s) : GenericCall(&s->generic_, s->cq_.get()),
//                                  server_(s) {}
//    private:
//     void Matched() override { new Call(server_); ReadNext(); }
//     void Received() override { ReadNext(); }  // requests().back() is new
//     void HalfClosed() override {
//       replies().push_back(...);
//       Finish(grpc::Status::OK);
//     }
//     MyServer* server_;
//   };
//
//   new MyServer::Call(server);  // asks gRPC for the first call
//   // the thread serving the queue:
//   while (cq->Next(&tag, &ok)) static_cast<GenericCall*>(tag)->Proceed(ok);
//   // at the end, the server shut down and that thread stopped:
//   GenericCall::DeleteQueuedCalls(cq);
//
// The call's address is the tag of its one pending operation. Between two
// operations it runs on the thread that polls the queue, or on whichever
// thread a subclass hands it to (Finish may be called from any thread, once).
#ifndef PSTRAIN_COMMON_GENERIC_CALL_H_
#define PSTRAIN_COMMON_GENERIC_CALL_H_

#include <cstddef>
#include <vector>

#include "grpcpp/generic/async_generic_service.h"
#include "grpcpp/grpcpp.h"

namespace pstrain {

class GenericCall {
 public:
  GenericCall(const GenericCall&) = delete;
  GenericCall& operator=(const GenericCall&) = delete;
  virtual ~GenericCall() = default;

  // The pending operation is done; `ok` says whether it succeeded. Deletes
  // the call when it is over, or when the server shuts down before a call
  // came.
  void Proceed(bool ok);

  // Shuts `cq` down and deletes the calls whose operations are still on it.
  // REQUIRES: the server was shut down and no thread polls `cq` any more.
  static void DeleteQueuedCalls(grpc::ServerCompletionQueue* cq);

 protected:
  // Each request message's bytes; an empty message may have no slice.
  using Messages = std::vector<std::vector<grpc::Slice>>;
  using Replies = std::vector<grpc::ByteBuffer>;

  // Asks gRPC for the next call of `service` on `cq`.
  GenericCall(grpc::AsyncGenericService* service,
              grpc::ServerCompletionQueue* cq);

  // gRPC matched a call (context() names its method): ask for the next one
  // (a new call object), then ReadNext() or Finish().
  virtual void Matched() = 0;
  // A request message arrived, now requests().back() (unreadable() if gRPC
  // could not give its bytes): ReadNext() or Finish().
  virtual void Received() = 0;
  // The client sent its last message: Finish(), here or later.
  virtual void HalfClosed() = 0;
  // Finish's `status`, with replies() as they will be sent, just before
  // they are: for a subclass's accounting.
  virtual void Finishing(const grpc::Status& status) {}

  // Reads the next request message.
  void ReadNext();
  // Frees the requests, then sends replies() (none when `status` is an
  // error) and `status`.
  void Finish(grpc::Status status);

  // Whether gRPC matched a call (false only before Matched()).
  bool matched() const { return state_ != State::kWaiting; }
  grpc::GenericServerContext& context() { return context_; }
  Messages& requests() { return requests_; }
  // Whether a request message's bytes could not be read.
  bool unreadable() const { return unreadable_; }
  Replies& replies() { return replies_; }

 private:
  enum class State { kWaiting, kReading, kWriting, kFinishing };

  // Writes the next reply; the last goes with the status.
  void WriteNext();

  State state_ = State::kWaiting;
  grpc::GenericServerContext context_;
  grpc::GenericServerAsyncReaderWriter stream_;
  grpc::ByteBuffer incoming_;
  Messages requests_;
  bool unreadable_ = false;
  Replies replies_;
  size_t written_ = 0;
  grpc::Status status_;
};

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_GENERIC_CALL_H_
