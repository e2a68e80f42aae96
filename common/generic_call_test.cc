#include "common/generic_call.h"

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "grpcpp/support/sync_stream.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace {

std::string Text(const std::vector<grpc::Slice>& slices) {
  std::string text;
  for (const grpc::Slice& s : slices) {
    text.append(reinterpret_cast<const char*>(s.begin()), s.size());
  }
  return text;
}

grpc::ByteBuffer Buffer(const std::string& text) {
  grpc::Slice slice(text);
  return grpc::ByteBuffer(&slice, 1);
}

// A server of three methods on GenericCall: /t/Echo answers each request
// message with itself, /t/Refuse answers INVALID_ARGUMENT after reading
// (having set replies), anything else UNIMPLEMENTED without reading.
class TestServer {
 public:
  TestServer() {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                             &port_);
    builder.RegisterAsyncGenericService(&generic_);
    cq_ = builder.AddCompletionQueue();
    server_ = builder.BuildAndStart();
    new Call(this);
    thread_ = std::thread([this] {
      while (!stop_.HasBeenNotified()) {
        void* tag = nullptr;
        bool ok = false;
        if (cq_->AsyncNext(
                &tag, &ok,
                absl::ToChronoTime(absl::Now() + absl::Milliseconds(5))) ==
            grpc::CompletionQueue::GOT_EVENT) {
          static_cast<GenericCall*>(tag)->Proceed(ok);
        }
      }
    });
  }
  ~TestServer() {
    // Calls in flight are cancelled while the thread still polls.
    server_->Shutdown(absl::ToChronoTime(absl::Now()));
    stop_.Notify();
    thread_.join();
    GenericCall::DeleteQueuedCalls(cq_.get());
  }

  std::string address() const { return absl::StrCat("127.0.0.1:", port_); }
  // What each call's Finishing saw: "<status code> <replies>".
  std::vector<std::string> finished() {
    absl::MutexLock lock(&mu_);
    return finished_;
  }

 private:
  class Call : public GenericCall {
   public:
    explicit Call(TestServer* server)
        : GenericCall(&server->generic_, server->cq_.get()), server_(server) {}

   private:
    void Matched() override {
      new Call(server_);
      if (context().method() != "/t/Echo" &&
          context().method() != "/t/Refuse") {
        Finish(grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "no such"));
        return;
      }
      ReadNext();
    }
    void Received() override { ReadNext(); }
    void HalfClosed() override {
      for (const std::vector<grpc::Slice>& message : requests()) {
        replies().push_back(Buffer(Text(message)));
      }
      Finish(context().method() == "/t/Echo"
                 ? grpc::Status::OK
                 : grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "refused"));
    }
    void Finishing(const grpc::Status& status) override {
      // Finish freed the requests before it sends the replies.
      EXPECT_TRUE(requests().empty());
      absl::MutexLock lock(&server_->mu_);
      server_->finished_.push_back(
          absl::StrCat(status.error_code(), " ", replies().size()));
    }

    TestServer* const server_;
  };

  int port_ = 0;
  grpc::AsyncGenericService generic_;
  std::unique_ptr<grpc::ServerCompletionQueue> cq_;
  std::unique_ptr<grpc::Server> server_;
  absl::Notification stop_;
  std::thread thread_;
  absl::Mutex mu_;
  std::vector<std::string> finished_ ABSL_GUARDED_BY(mu_);
};

// Sends `messages` on a stream of `method`, then reads every reply.
grpc::Status Exchange(const std::string& address, const std::string& method,
                      const std::vector<std::string>& messages,
                      std::vector<std::string>* replies) {
  auto channel =
      grpc::CreateChannel(address, grpc::InsecureChannelCredentials());
  const grpc::internal::RpcMethod rpc(
      method.c_str(), grpc::internal::RpcMethod::BIDI_STREAMING, channel);
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(30)));
  std::unique_ptr<grpc::ClientReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer>>
      stream(grpc::internal::ClientReaderWriterFactory<
             grpc::ByteBuffer, grpc::ByteBuffer>::Create(channel.get(), rpc,
                                                         &context));
  for (const std::string& message : messages) {
    if (!stream->Write(Buffer(message))) break;
  }
  stream->WritesDone();
  grpc::ByteBuffer reply;
  while (stream->Read(&reply)) {
    std::vector<grpc::Slice> slices;
    EXPECT_TRUE(reply.Dump(&slices).ok());
    replies->push_back(Text(slices));
  }
  return stream->Finish();
}

TEST(GenericCall, ReadsEveryMessageThenWritesEveryReplyAndTheStatus) {
  TestServer server;
  std::vector<std::string> replies;
  const grpc::Status status =
      Exchange(server.address(), "/t/Echo", {"a", "bb", "", "dddd"}, &replies);
  EXPECT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(replies, (std::vector<std::string>{"a", "bb", "", "dddd"}));
  // One message, one reply: written with the status.
  replies.clear();
  EXPECT_TRUE(Exchange(server.address(), "/t/Echo", {"x"}, &replies).ok());
  EXPECT_EQ(replies, std::vector<std::string>{"x"});
  EXPECT_EQ(server.finished(), (std::vector<std::string>{"0 4", "0 1"}));
}

TEST(GenericCall, AnErrorStatusGoesWithoutTheReplies) {
  TestServer server;
  std::vector<std::string> replies;
  grpc::Status status =
      Exchange(server.address(), "/t/Refuse", {"a", "b"}, &replies);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(status.error_message(), "refused");
  EXPECT_TRUE(replies.empty());
  // Refused when matched, before reading anything.
  status = Exchange(server.address(), "/t/Other", {"a"}, &replies);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNIMPLEMENTED);
  EXPECT_TRUE(replies.empty());
  EXPECT_EQ(server.finished(), (std::vector<std::string>{"3 0", "12 0"}));
}

TEST(GenericCall, CallsStillOpenAreDeletedWhenTheServerStops) {
  auto server = std::make_unique<TestServer>();
  auto channel = grpc::CreateChannel(server->address(),
                                     grpc::InsecureChannelCredentials());
  const grpc::internal::RpcMethod rpc(
      "/t/Echo", grpc::internal::RpcMethod::BIDI_STREAMING, channel);
  grpc::ClientContext context;
  std::unique_ptr<grpc::ClientReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer>>
      stream(grpc::internal::ClientReaderWriterFactory<
             grpc::ByteBuffer, grpc::ByteBuffer>::Create(channel.get(), rpc,
                                                         &context));
  ASSERT_TRUE(stream->Write(Buffer("never half-closed")));
  server.reset();  // with the call reading: no leak, no crash
  grpc::ByteBuffer reply;
  EXPECT_FALSE(stream->Read(&reply));
  EXPECT_FALSE(stream->Finish().ok());
}

}  // namespace
}  // namespace pstrain
