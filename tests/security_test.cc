// Security of the real `ps` and `chief` processes over real gRPC on
// 127.0.0.1: with mutual TLS they refuse clients whose certificate the
// cluster CA did not sign (or that have none), and a run with TLS finishes;
// with an auth token every ParameterServer and Chief call without the right
// token gets UNAUTHENTICATED and changes nothing; the chief's methods of a
// ps (CreateVariables, Save, Restore, SetWorkers) are PERMISSION_DENIED to
// a worker's certificate or token. Certificates are made here
// with the openssl command line.
#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "chief/chief_client.h"
#include "common/cluster_spec.h"
#include "common/grpc_options.h"
#include "common/grpc_security.h"
#include "common/grpc_status.h"
#include "grpcpp/impl/client_unary_call.h"
#include "gtest/gtest.h"
#include "proto/chief_service.grpc.pb.h"
#include "proto/ps_service.grpc.pb.h"
#include "tests/local_cluster.h"
#include "tests/ps_cluster.h"
#include "tests/subprocess.h"

namespace pstrain {
namespace testing {
namespace {

constexpr char kRun[] = "run-1";
constexpr char kToken[] = "correct-horse-battery-staple";

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// PEM files made by openssl: a cluster CA and certificates it signed
// (server and client use) for 127.0.0.1 (every task) and for localhost (the
// chief, in tests whose TF_CONFIG puts the chief there), and an unrelated CA
// with a certificate of its own.
struct Pki {
  std::string ca, cert, key;                     // the cluster's
  std::string chief, chief_key;                  // the chief's, by name
  std::string other_ca, stranger, stranger_key;  // another CA's
};

const Pki* pki = nullptr;

std::string MakePki(Pki* out) {
  const std::string dir = TempPath("pki");
  mkdir(dir.c_str(), 0700);
  const std::string script = absl::StrCat(
      "set -e; cd '", dir, "'\n",
      "ca() { openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 "
      "-nodes -keyout $1.key -out $1.pem -days 2 -subj /CN=$1; }\n"
      "leaf() { openssl req -new -newkey ec -pkeyopt "
      "ec_paramgen_curve:P-256 -nodes -keyout $1.key -out $1.csr -subj /CN=$1"
      " && openssl x509 -req -in $1.csr -CA $2.pem -CAkey $2.key "
      "-set_serial $3 -days 2 -extfile leaf.ext -out $1.pem; }\n"
      "ext() { printf 'subjectAltName=%s\\nextendedKeyUsage=serverAuth,"
      "clientAuth\\nbasicConstraints=CA:FALSE\\n' $1 > leaf.ext; }\n"
      "ca cluster-ca; ca other-ca\n"
      "ext IP:127.0.0.1; leaf node cluster-ca 1; leaf stranger other-ca 2\n"
      "ext DNS:localhost; leaf chief cluster-ca 3\n");
  const std::string log = dir + "/openssl.log";
  // The script goes in through the environment: no shell quoting trouble.
  setenv("PSTRAIN_PKI_SCRIPT", script.c_str(), 1);
  if (std::system(
          ("bash -c \"$PSTRAIN_PKI_SCRIPT\" > '" + log + "' 2>&1").c_str()) !=
      0) {
    return "openssl failed: " + ReadFile(log);
  }
  out->ca = dir + "/cluster-ca.pem";
  out->cert = dir + "/node.pem";
  out->key = dir + "/node.key";
  out->chief = dir + "/chief.pem";
  out->chief_key = dir + "/chief.key";
  out->other_ca = dir + "/other-ca.pem";
  out->stranger = dir + "/stranger.pem";
  out->stranger_key = dir + "/stranger.key";
  return "";
}

std::vector<std::string> TlsFlags() {
  return {"--tls_cert=" + pki->cert, "--tls_key=" + pki->key,
          "--tls_ca=" + pki->ca};
}

std::string TokenFile(const std::string& name, const std::string& content) {
  const std::string path = TempPath(name);
  FILE* f = fopen(path.c_str(), "w");
  fputs(content.c_str(), f);
  fclose(f);
  return path;
}

// What a client holds, loaded through LoadGrpcSecurity as the binaries do.
GrpcSecurity Load(const std::string& cert, const std::string& key,
                  const std::string& ca) {
  GrpcSecurityFiles files;
  files.tls_cert = cert;
  files.tls_key = key;
  files.tls_ca = ca;
  absl::StatusOr<GrpcSecurity> security = LoadGrpcSecurity(files);
  EXPECT_TRUE(security.ok()) << security.status();
  return security.ok() ? *security : GrpcSecurity();
}

GrpcSecurity ClusterTls() { return Load(pki->cert, pki->key, pki->ca); }

// Trusts the cluster CA (so it accepts the server) but presents a
// certificate of another CA.
GrpcSecurity StrangerTls() {
  return Load(pki->stranger, pki->stranger_key, pki->ca);
}

// Trusts the cluster CA, presents no certificate.
GrpcSecurity NoCertificateTls() {
  GrpcSecurity security;
  security.tls_ca_pem = ReadFile(pki->ca);
  return security;
}

// Presents the chief's certificate (naming localhost, not 127.0.0.1).
GrpcSecurity ChiefTls() { return Load(pki->chief, pki->chief_key, pki->ca); }

GrpcSecurity WithToken(const std::string& token) {
  GrpcSecurity security;
  security.auth_token = token;
  return security;
}

constexpr char kChiefToken[] = "the-chief-alone-knows-this";

// A ps task, started with `flags`, in a cluster whose chief (never started)
// is at localhost; returns once a channel secured by `security` is ready.
Subprocess StartPs(const std::string& name,
                   const std::vector<std::string>& flags,
                   const GrpcSecurity& security, std::string* address) {
  *address = absl::StrCat("127.0.0.1:", PickFreePort());
  Subprocess ps = Subprocess::Start(
      "ps/ps", flags,
      {{"TF_CONFIG",
        absl::StrCat("{\"cluster\": {\"chief\": [\"localhost:", PickFreePort(),
                     "\"], \"ps\": [\"", *address,
                     "\"]}, \"task\": {\"type\": \"ps\", \"index\": 0}}")}},
      TempPath(name + "-ps.log"));
  EXPECT_TRUE(CreatePstrainChannel(*address, security)
                  ->WaitForConnected(
                      absl::ToChronoTime(absl::Now() + absl::Seconds(30))))
      << ReadFile(ps.log_path());
  return ps;
}

// The chief of `cluster`, whose ps and workers are not started, with
// `flags` (after defaults they may override); returns once a channel secured
// by `security` is ready.
Subprocess StartChief(const std::string& name, const LocalCluster& cluster,
                      const std::vector<std::string>& flags,
                      const GrpcSecurity& security, std::string* address) {
  const int port = PickFreePort();
  *address = absl::StrCat("127.0.0.1:", port);
  std::vector<std::string> args = {absl::StrCat("--port=", port), "--model=mlp",
                                   "--wait_for_tasks_seconds=120",
                                   "--model_dir=" + TempPath(name + "-model")};
  args.insert(args.end(), flags.begin(), flags.end());
  Subprocess chief = cluster.Start(name, "chief", 0, args);
  EXPECT_TRUE(CreatePstrainChannel(*address, security)
                  ->WaitForConnected(
                      absl::ToChronoTime(absl::Now() + absl::Seconds(30))))
      << Log(chief);
  return chief;
}

// One variable "w" [4] of 1.0 on one ps task, async SGD.
std::vector<VariableDef> Model() { return {ConstantVariable("w", {4}, 1.0f)}; }

std::unique_ptr<ps::PsClusterClient> Connect(const std::string& address,
                                             const GrpcSecurity& security) {
  ps::PsClientOptions options;
  options.run_id = kRun;
  options.sender = MakeTask(JOB_WORKER, 0);
  options.timeout = absl::Seconds(10);
  std::vector<std::unique_ptr<ps::PsClient>> clients;
  clients.push_back(std::make_unique<ps::PsClient>(
      CreatePstrainChannel(address, security), options));
  PlacementOptions placement_options;
  placement_options.num_ps = 1;
  absl::StatusOr<Placement> placement =
      ComputePlacement(Model(), placement_options);
  EXPECT_TRUE(placement.ok());
  absl::StatusOr<std::unique_ptr<ps::PsClusterClient>> client =
      ps::PsClusterClient::Create(std::move(clients), *placement, Model());
  EXPECT_TRUE(client.ok()) << client.status();
  return client.ok() ? *std::move(client) : nullptr;
}

// w's value and version as the ps serves them to `security`'s client.
std::pair<std::vector<float>, int64_t> PullW(const std::string& address,
                                             const GrpcSecurity& security) {
  Tensor w = *Tensor::Create(DT_FLOAT, {4});
  absl::StatusOr<int64_t> version =
      Connect(address, security)->PullDense(0, {{"w", &w}});
  EXPECT_TRUE(version.ok()) << version.status();
  return {std::vector<float>(w.flat<float>().begin(), w.flat<float>().end()),
          version.ok() ? *version : -1};
}

// A push of gradient 1 for every element of w (applied, it moves w).
absl::Status PushW(ps::PsClusterClient* client) {
  Tensor g = *Tensor::Create(DT_FLOAT, {4});
  for (float& v : g.flat<float>()) v = 1.0f;
  return client->PushDense(0, 1, {{"w", &g}});
}

RequestHeader Header(const std::string& run_id, const TaskRef& sender) {
  RequestHeader header;
  header.set_run_id(run_id);
  *header.mutable_sender() = sender;
  header.set_request_id(1);
  return header;
}

// A sync run of one worker: "w" [4] of 1.0 and table "emb" [8, 2] of 0.0 on
// ps task 0, SGD.
CreateVariablesRequest CreateRequest() {
  CreateVariablesRequest request;
  *request.mutable_header() = Header(kRun, MakeTask(JOB_CHIEF, 0));
  request.set_ps_task(0);
  request.mutable_optimizer()->mutable_sgd();
  request.mutable_optimizer()->set_learning_rate(0.5);
  request.mutable_update()->set_mode(UpdateConfig::SYNC);
  request.mutable_update()->set_num_workers(1);
  request.mutable_update()->set_max_staleness(-1);
  auto add = [&](const std::string& name, std::vector<int64_t> dims,
                 bool sparse) {
    ShardVariable* v = request.add_variables();
    v->mutable_def()->set_name(name);
    v->mutable_def()->set_dtype(DT_FLOAT);
    v->mutable_def()->set_sparse(sparse);
    for (int64_t d : dims) v->mutable_def()->mutable_shape()->add_dims(d);
    if (sparse) {
      v->mutable_def()->mutable_initializer()->mutable_zeros();
    } else {
      v->mutable_def()->mutable_initializer()->mutable_constant()->set_value(1);
    }
    v->mutable_placement()->set_name(name);
    v->mutable_placement()->set_partitioning(VariablePlacement::ROW_RANGES);
    v->mutable_placement()->add_slices()->set_row_end(dims[0]);
  };
  add("w", {4}, false);
  add("emb", {8, 2}, true);
  return request;
}

// A ParameterServer call through a raw stub.
struct PsCall {
  std::string method;
  bool chief_only;
  std::function<grpc::Status(ParameterServer::Stub*, grpc::ClientContext*)>
      call;
};

// A call of every ParameterServer method, with a request that succeeds on a
// ps created by CreateRequest() (at step 0, holding `checkpoint`, the slices
// of its "ckpt-setup") over an authorised channel, when made in this order.
// Refused, they change nothing.
std::vector<PsCall> EveryPsCall(const std::vector<SavedSlice>& checkpoint) {
  const RequestHeader header = Header(kRun, MakeTask(JOB_WORKER, 0));
  std::vector<PsCall> calls;
  calls.push_back({"CreateVariables", true, [](auto* stub, auto* context) {
                     CreateVariablesResponse response;
                     return stub->CreateVariables(context, CreateRequest(),
                                                  &response);
                   }});
  calls.push_back({"GetShardStatus", false, [=](auto* stub, auto* context) {
                     GetShardStatusRequest request;
                     *request.mutable_header() = header;
                     ShardStatus response;
                     return stub->GetShardStatus(context, request, &response);
                   }});
  calls.push_back({"PullDense", false, [=](auto* stub, auto* context) {
                     PullDenseRequest request;
                     *request.mutable_header() = header;
                     request.add_names("w");
                     auto reader = stub->PullDense(context, request);
                     PullDenseResponse response;
                     while (reader->Read(&response)) {
                     }
                     return reader->Finish();
                   }});
  calls.push_back({"PullSparse", false, [=](auto* stub, auto* context) {
                     PullSparseRequest request;
                     *request.mutable_header() = header;
                     request.set_name("emb");
                     request.add_ids(1);
                     PullSparseResponse response;
                     return stub->PullSparse(context, request, &response);
                   }});
  calls.push_back({"Save", true, [=](auto* stub, auto* context) {
                     SaveRequest request;
                     *request.mutable_header() = header;
                     request.set_directory("ckpt-call");
                     request.set_step(0);
                     SaveResponse response;
                     return stub->Save(context, request, &response);
                   }});
  calls.push_back({"Restore", true, [=](auto* stub, auto* context) {
                     RestoreRequest request;
                     *request.mutable_header() = header;
                     request.set_directory("ckpt-setup");
                     for (const SavedSlice& slice : checkpoint) {
                       *request.add_slices() = slice;
                     }
                     RestoreResponse response;
                     return stub->Restore(context, request, &response);
                   }});
  calls.push_back({"SetWorkers", true, [=](auto* stub, auto* context) {
                     SetWorkersRequest request;
                     *request.mutable_header() = header;
                     request.set_replicas_to_aggregate(1);
                     SetWorkersResponse response;
                     return stub->SetWorkers(context, request, &response);
                   }});
  calls.push_back({"PushDense", false, [=](auto* stub, auto* context) {
                     PushDenseResponse response;
                     auto writer = stub->PushDense(context, &response);
                     PushDenseRequest request;
                     *request.mutable_header() = header;
                     request.set_batch_size(1);
                     request.set_last(true);
                     NamedTensor* g = request.add_gradients();
                     g->set_name("w");
                     g->mutable_tensor()->set_dtype(DT_FLOAT);
                     g->mutable_tensor()->mutable_shape()->add_dims(4);
                     const float ones[4] = {1, 1, 1, 1};
                     g->mutable_tensor()->set_content(
                         reinterpret_cast<const char*>(ones), sizeof(ones));
                     writer->Write(request);
                     writer->WritesDone();
                     return writer->Finish();
                   }});
  calls.push_back({"PushSparse", false, [=](auto* stub, auto* context) {
                     PushSparseRequest request;
                     *request.mutable_header() = header;
                     request.set_name("emb");
                     request.set_batch_size(1);
                     request.add_ids(1);
                     TensorProto* g = request.mutable_gradients();
                     g->set_dtype(DT_FLOAT);
                     g->mutable_shape()->add_dims(1);
                     g->mutable_shape()->add_dims(2);
                     const float ones[2] = {1, 1};
                     g->set_content(reinterpret_cast<const char*>(ones),
                                    sizeof(ones));
                     PushSparseResponse response;
                     return stub->PushSparse(context, request, &response);
                   }});
  return calls;
}

// Makes `calls` (those of the chief's methods only when `chief_only`)
// through a raw stub of `channel`; returns each call's status by method.
std::map<std::string, absl::Status> Call(
    const std::vector<PsCall>& calls,
    const std::shared_ptr<grpc::Channel>& channel, bool chief_only = false) {
  auto stub = ParameterServer::NewStub(channel);
  std::map<std::string, absl::Status> result;
  for (const PsCall& c : calls) {
    if (chief_only && !c.chief_only) continue;
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
    result[c.method] = FromGrpcStatus(c.call(stub.get(), &context));
  }
  return result;
}

// Creates the run of CreateRequest() on the ps behind `channel` (a
// channel of the chief's) and saves "ckpt-setup"; returns its slices.
std::vector<SavedSlice> SetUpRun(
    const std::shared_ptr<grpc::Channel>& channel) {
  auto stub = ParameterServer::NewStub(channel);
  grpc::ClientContext create_context;
  CreateVariablesResponse created;
  const grpc::Status create =
      stub->CreateVariables(&create_context, CreateRequest(), &created);
  EXPECT_TRUE(create.ok()) << create.error_message();
  grpc::ClientContext save_context;
  SaveRequest save;
  *save.mutable_header() = Header(kRun, MakeTask(JOB_CHIEF, 0));
  save.set_directory("ckpt-setup");
  SaveResponse saved;
  const grpc::Status status = stub->Save(&save_context, save, &saved);
  EXPECT_TRUE(status.ok()) << status.error_message();
  return {saved.slices().begin(), saved.slices().end()};
}

// Every Chief method called once through a raw stub of `channel`, as
// `sender` of run `run_id`.
std::map<std::string, absl::Status> CallEveryChiefMethod(
    const std::shared_ptr<grpc::Channel>& channel, const std::string& run_id,
    const TaskRef& sender) {
  auto stub = Chief::NewStub(channel);
  auto context = [] {
    auto c = std::make_unique<grpc::ClientContext>();
    c->set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
    return c;
  };
  const RequestHeader header = Header(run_id, sender);
  std::map<std::string, absl::Status> result;
  {
    RegisterRequest request;
    *request.mutable_header() = header;
    request.set_incarnation(7);
    RegisterResponse response;
    result["Register"] =
        FromGrpcStatus(stub->Register(context().get(), request, &response));
  }
  {
    HeartbeatRequest request;
    *request.mutable_header() = header;
    request.set_incarnation(7);
    HeartbeatResponse response;
    result["Heartbeat"] =
        FromGrpcStatus(stub->Heartbeat(context().get(), request, &response));
  }
  {
    GetTrainingStateRequest request;
    *request.mutable_header() = header;
    TrainingState response;
    result["GetTrainingState"] = FromGrpcStatus(
        stub->GetTrainingState(context().get(), request, &response));
  }
  {
    ReportMetricsRequest request;
    *request.mutable_header() = header;
    ReportMetricsResponse response;
    result["ReportMetrics"] = FromGrpcStatus(
        stub->ReportMetrics(context().get(), request, &response));
  }
  {
    TrainingFinishedRequest request;
    *request.mutable_header() = header;
    request.set_step(1000);
    TrainingFinishedResponse response;
    result["TrainingFinished"] = FromGrpcStatus(
        stub->TrainingFinished(context().get(), request, &response));
  }
  return result;
}

class SecurityTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    static Pki made;
    const std::string error = MakePki(&made);
    ASSERT_EQ(error, "");
    pki = &made;
  }
  void SetUp() override {
    if (pki == nullptr) GTEST_SKIP() << "no certificates";
  }
};

// Each per-method call below is one that succeeds over an authorised
// channel (the test ends by making them so): refused, it is refused for who
// calls, not for what it asks.
TEST_F(SecurityTest, TlsPsRefusesClientsWithoutAClusterCertificate) {
  std::string address;
  std::vector<std::string> flags = TlsFlags();
  flags.push_back("--model_dir=" + TempPath("tls-ps-model"));
  Subprocess ps = StartPs("tls", flags, ClusterTls(), &address);
  const auto chief = CreatePstrainChannel(address, ChiefTls());
  const std::vector<PsCall> calls = EveryPsCall(SetUpRun(chief));
  const auto before = PullW(address, ClusterTls());
  EXPECT_EQ(before.first, std::vector<float>(4, 1.0f));

  const std::map<std::string, GrpcSecurity> refused = {
      {"another CA's certificate", StrangerTls()},
      {"no certificate", NoCertificateTls()},
      {"no TLS", GrpcSecurity()},
  };
  for (const auto& [what, security] : refused) {
    for (const auto& [method, status] :
         Call(calls, CreatePstrainChannel(address, security))) {
      // The handshake fails: no call gets as far as the service.
      EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable)
          << what << ": " << method << ": " << status;
    }
  }
  // A worker's certificate (the cluster's, naming 127.0.0.1, not the
  // chief's host): the chief's methods are refused.
  const std::map<std::string, absl::Status> by_worker =
      Call(calls, CreatePstrainChannel(address, ClusterTls()),
           /*chief_only=*/true);
  EXPECT_EQ(by_worker.size(), 4u);
  for (const auto& [method, status] : by_worker) {
    EXPECT_EQ(status.code(), absl::StatusCode::kPermissionDenied)
        << method << ": " << status;
  }
  EXPECT_EQ(PullW(address, ClusterTls()), before);
  EXPECT_FALSE(std::filesystem::exists(TempPath("tls-ps-model/ckpt-call")));

  // The chief's certificate: every call succeeds, in order.
  for (const auto& [method, status] : Call(calls, chief)) {
    EXPECT_TRUE(status.ok()) << method << ": " << status;
  }
  // The push was applied once: w = 1 - 0.5 * 1.
  EXPECT_EQ(PullW(address, ClusterTls()).first,
            std::vector<float>(4, 1.0f - 0.5f));
  EXPECT_EQ(ps.Terminate(), 0);
  EXPECT_TRUE(Contains(Log(ps), "(mutual TLS)")) << Log(ps);
}

TEST_F(SecurityTest, TlsChiefRefusesClientsWithoutAClusterCertificate) {
  if (!HaveFashionMnist()) GTEST_SKIP() << "skipped: no " << kFashionMnistDir;
  const LocalCluster cluster(1, 1);
  std::string address;
  Subprocess chief =
      StartChief("tls", cluster, TlsFlags(), ClusterTls(), &address);
  const std::map<std::string, GrpcSecurity> refused = {
      {"another CA's certificate", StrangerTls()},
      {"no certificate", NoCertificateTls()},
      {"no TLS", GrpcSecurity()},
  };
  for (const auto& [what, security] : refused) {
    for (const auto& [method, status] :
         CallEveryChiefMethod(CreatePstrainChannel(address, security), "",
                              MakeTask(JOB_WORKER, 0))) {
      EXPECT_FALSE(status.ok()) << what << ": " << method;
    }
  }
  // The cluster's certificate registers.
  chief::ChiefClient client(CreatePstrainChannel(address, ClusterTls()),
                            MakeTask(JOB_WORKER, 0));
  const absl::StatusOr<RegisterResponse> run =
      client.Register(absl::Seconds(10));
  EXPECT_TRUE(run.ok()) << run.status();
  EXPECT_TRUE(Contains(Log(chief), "(mutual TLS)")) << Log(chief);
}

// Every process on TLS, with the token too: ps and workers register with
// the chief, the chief creates variables, workers push and pull, all over
// mutual TLS.
TEST_F(SecurityTest, TrainingRunWithTlsAndTokenFinishes) {
  if (!HaveFashionMnist()) GTEST_SKIP() << "skipped: no " << kFashionMnistDir;
  std::vector<std::string> flags = TlsFlags();
  flags.push_back("--auth_token_file=" +
                  TokenFile("run-token", "run-secret\n"));
  const LocalCluster cluster(1, 2);
  std::vector<Subprocess> tasks;
  // The chief's own token goes to the chief and the ps alone.
  std::vector<std::string> ps_flags = flags;
  ps_flags.push_back("--chief_token_file=" +
                     TokenFile("run-chief-token", "chief-secret"));
  ps_flags.push_back("--model_dir=" + TempPath("tls-run-model"));
  tasks.push_back(cluster.Start("tls-run", "ps", 0, ps_flags));
  for (int i = 0; i < 2; ++i) {
    tasks.push_back(cluster.Start("tls-run", "worker", i, flags));
  }
  std::vector<std::string> chief_flags = ps_flags;
  for (const char* flag : {"--model=mlp", "--steps=10", "--batch_size=32",
                           "--print_every_steps=5"}) {
    chief_flags.push_back(flag);
  }
  Subprocess chief = cluster.Start("tls-run", "chief", 0, chief_flags);
  ASSERT_EQ(chief.Wait(120), 0) << Log(chief);
  for (Subprocess& task : tasks) EXPECT_EQ(task.Wait(60), 0) << Log(task);
  const std::string log = Log(chief);
  EXPECT_TRUE(Contains(log, "(mutual TLS, auth token)")) << log;
  EXPECT_TRUE(Contains(log, "step 10/10")) << log;
  for (Subprocess* p : {&chief, &tasks[0], &tasks[1], &tasks[2]}) {
    EXPECT_FALSE(Contains(Log(*p), "run-secret")) << Log(*p);
    EXPECT_FALSE(Contains(Log(*p), "chief-secret")) << Log(*p);
  }
}

TEST_F(SecurityTest, PsRefusesMissingAndWrongTokensAndChangesNothing) {
  std::string address;
  Subprocess ps = StartPs(
      "token",
      {"--auth_token_file=" + TokenFile("ps-token", std::string(kToken) + "\n"),
       "--chief_token_file=" + TokenFile("ps-chief-token", kChiefToken),
       "--model_dir=" + TempPath("token-ps-model")},
      GrpcSecurity(), &address);
  GrpcSecurity chief_security = WithToken(kToken);
  chief_security.chief_token = kChiefToken;
  chief_security.is_chief = true;
  const auto chief = CreatePstrainChannel(address, chief_security);
  const std::vector<PsCall> calls = EveryPsCall(SetUpRun(chief));
  const auto before = PullW(address, WithToken(kToken));
  EXPECT_EQ(before.first, std::vector<float>(4, 1.0f));

  for (const std::string& token :
       {std::string(""), std::string("wrong"), std::string(kToken) + "x",
        std::string(kChiefToken) + "x"}) {
    // The project's client (raw ByteBuffer calls for dense tensors).
    auto client = Connect(address, WithToken(token));
    EXPECT_EQ(PushW(client.get()).code(), absl::StatusCode::kUnauthenticated)
        << "token '" << token << "'";
    Tensor w = *Tensor::Create(DT_FLOAT, {4});
    EXPECT_EQ(client->PullDense(0, {{"w", &w}}).status().code(),
              absl::StatusCode::kUnauthenticated);
    // Every method, through the generated stub.
    const std::map<std::string, absl::Status> refused =
        Call(calls, CreatePstrainChannel(address, WithToken(token)));
    EXPECT_EQ(refused.size(), calls.size());
    for (const auto& [method, status] : refused) {
      EXPECT_EQ(status.code(), absl::StatusCode::kUnauthenticated)
          << "token '" << token << "': " << method << ": " << status;
      EXPECT_FALSE(Contains(std::string(status.message()), kToken));
    }
  }
  // The workers' token: the chief's methods are refused.
  const std::map<std::string, absl::Status> by_worker =
      Call(calls, CreatePstrainChannel(address, WithToken(kToken)),
           /*chief_only=*/true);
  EXPECT_EQ(by_worker.size(), 4u);
  for (const auto& [method, status] : by_worker) {
    EXPECT_EQ(status.code(), absl::StatusCode::kPermissionDenied)
        << method << ": " << status;
  }
  EXPECT_EQ(PullW(address, WithToken(kToken)), before);
  EXPECT_FALSE(std::filesystem::exists(TempPath("token-ps-model/ckpt-call")));
  absl::StatusOr<ShardStatus> status =
      Connect(address, WithToken(kToken))->client(0)->GetShardStatus();
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_EQ(status->pushes_applied(), 0);

  // The chief's token: every call succeeds, in order; the push is applied
  // once.
  for (const auto& [method, status] : Call(calls, chief)) {
    EXPECT_TRUE(status.ok()) << method << ": " << status;
  }
  EXPECT_EQ(PullW(address, WithToken(kToken)).first,
            std::vector<float>(4, 0.5f));

  // gRPC's health service needs no token (Kubernetes probes).
  {
    auto channel = CreatePstrainChannel(address);
    const grpc::internal::RpcMethod check("/grpc.health.v1.Health/Check",
                                          grpc::internal::RpcMethod::NORMAL_RPC,
                                          channel);
    grpc::ClientContext context;
    grpc::Slice empty{std::string()};
    grpc::ByteBuffer request(&empty, 1), response;
    EXPECT_TRUE(
        (grpc::internal::BlockingUnaryCall<grpc::ByteBuffer, grpc::ByteBuffer>(
             channel.get(), check, &context, request, &response))
            .ok());
  }

  EXPECT_EQ(ps.Terminate(), 0);
  EXPECT_TRUE(Contains(Log(ps), "(auth token)")) << Log(ps);
  EXPECT_FALSE(Contains(Log(ps), kToken)) << Log(ps);
}

TEST_F(SecurityTest, ChiefRefusesMissingAndWrongTokensAndChangesNothing) {
  if (!HaveFashionMnist()) GTEST_SKIP() << "skipped: no " << kFashionMnistDir;
  const LocalCluster cluster(1, 1);
  std::string address;
  // The chief gives up waiting for its tasks after 5 s and names those that
  // never registered: what the refused calls left behind shows there.
  Subprocess chief = StartChief(
      "token", cluster,
      {"--auth_token_file=" + TokenFile("chief-token", std::string(kToken)),
       "--chief_token_file=" + TokenFile("chief-chief-token", kChiefToken),
       "--wait_for_tasks_seconds=5"},
      GrpcSecurity(), &address);
  for (const std::string& token : {std::string(""), std::string("wrong")}) {
    // ps:0 tries every call (Register first).
    for (const auto& [method, status] :
         CallEveryChiefMethod(CreatePstrainChannel(address, WithToken(token)),
                              "", MakeTask(JOB_PS, 0))) {
      EXPECT_EQ(status.code(), absl::StatusCode::kUnauthenticated)
          << "token '" << token << "': " << method << ": " << status;
    }
    chief::ChiefClient client(CreatePstrainChannel(address, WithToken(token)),
                              MakeTask(JOB_PS, 0));
    EXPECT_EQ(client.Register(absl::Seconds(5)).status().code(),
              absl::StatusCode::kUnauthenticated);
  }
  {
    // The right token registers worker:0.
    chief::ChiefClient worker(CreatePstrainChannel(address, WithToken(kToken)),
                              MakeTask(JOB_WORKER, 0));
    absl::StatusOr<RegisterResponse> run = worker.Register(absl::Seconds(10));
    ASSERT_TRUE(run.ok()) << run.status();
    EXPECT_TRUE(worker.Heartbeat(0).ok());
  }  // closes its connection, which would slow the chief's shutdown
  // ps:0's refused Registers left no trace.
  EXPECT_EQ(chief.Wait(60), 1) << Log(chief);
  const std::string log = Log(chief);
  EXPECT_TRUE(Contains(log, "these tasks never registered: ps:0\n")) << log;
  EXPECT_TRUE(Contains(log, "(auth token)")) << log;
  EXPECT_FALSE(Contains(log, kToken)) << log;
}

TEST_F(SecurityTest, BadSecurityFlagsExitWithStatusTwoAndOneLine) {
  const LocalCluster cluster(1, 1);
  const std::string empty = TokenFile("empty-token", "\n");
  const std::string secret = TokenFile("bad-token", "top\x01secret\n");
  const std::string token = TokenFile("good-token", "a-token\n");
  struct Case {
    std::string type;
    std::vector<std::string> flags;
    std::string line;
  };
  const std::string missing =
      " missing (mutual TLS needs --tls_cert, --tls_key and --tls_ca "
      "together)\n";
  const std::vector<Case> cases = {
      {"ps", {"--tls_cert=" + pki->cert}, "--tls_key:" + missing},
      {"worker",
       {"--tls_key=" + pki->key, "--tls_ca=" + pki->ca},
       "--tls_cert:" + missing},
      {"chief",
       {"--tls_cert=" + pki->cert, "--tls_key=" + pki->key},
       "--tls_ca:" + missing},
      {"ps",
       {"--tls_cert=" + pki->cert, "--tls_key=/nonexistent/key.pem",
        "--tls_ca=" + pki->ca},
       "--tls_key: cannot read /nonexistent/key.pem: No such file or "
       "directory\n"},
      {"chief",
       {"--auth_token_file=" + empty},
       "--auth_token_file: " + empty + " is empty\n"},
      {"worker",
       {"--auth_token_file=" + secret},
       "--auth_token_file: " + secret +
           " holds a character other than printable ASCII\n"},
      // Without a token of its own, the chief's calls could not be told
      // from a worker's.
      {"ps",
       {"--auth_token_file=" + token},
       "--chief_token_file: needed with --auth_token_file (without it or "
       "mutual TLS, any worker could call the chief's methods)\n"},
      {"chief",
       {"--auth_token_file=" + token},
       "--chief_token_file: needed with --auth_token_file (the ps tasks "
       "accept the chief's calls only with it)\n"},
      {"chief",
       {"--auth_token_file=" + token, "--chief_token_file=" + token},
       "--chief_token_file: the chief's token must differ from "
       "--auth_token_file's\n"},
      {"ps",
       {"--chief_token_file=" + token},
       "--chief_token_file: needs --auth_token_file (the token of every "
       "task)\n"},
  };
  for (const Case& c : cases) {
    Subprocess p = cluster.Start("flags", c.type, 0, c.flags);
    EXPECT_EQ(p.Wait(60), 2) << c.type << ": " << Log(p);
    EXPECT_EQ(Log(p), c.line) << c.type;
  }
}

}  // namespace
}  // namespace testing
}  // namespace pstrain
