// NcclGradientReducer on real GPUs; skips (printing SKIPPED: and why) on a
// machine without one. One GPU: a one-rank communicator, alone and as the
// all-reduce of a LocalReplica next to one on the CPU ring. Two GPUs: two
// processes, one rank each, against the CPU ring's sum of the same data.
// NCCL refuses two ranks on one GPU ("Duplicate GPU detected"), so the
// two-process test needs two.
#include "collective/nccl_gradient_reducer.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "collective/bf16.h"
#include "collective/local_replica.h"
#include "collective/ring_participant.h"
#include "common/cuda_probe.h"
#include "common/tensor.h"
#include "gtest/gtest.h"
#include "tests/subprocess.h"

namespace pstrain {
namespace collective {
namespace {

// GPUs of this machine, counted in a child process the first time (before
// this process touches CUDA: a forked child of a CUDA process cannot use
// CUDA), then remembered.
int ProbeGpusInChild(std::string* why) {
  int fds[2];
  if (pipe(fds) != 0) return 0;
  const pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    absl::StatusOr<int> count = CudaDeviceCount();
    const std::string said =
        count.ok() ? absl::StrCat(*count) : std::string(count.status().message());
    if (write(fds[1], said.data(), said.size()) < 0) _exit(1);
    _exit(0);
  }
  close(fds[1]);
  std::string said;
  char buffer[256];
  ssize_t n;
  while ((n = read(fds[0], buffer, sizeof(buffer))) > 0) said.append(buffer, n);
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  char* end = nullptr;
  const long count = std::strtol(said.c_str(), &end, 10);
  if (said.empty() || *end != '\0') {
    *why = said.empty() ? "the GPU probe died" : said;
    return 0;
  }
  return static_cast<int>(count);
}

int CountGpusInChild(std::string* why) {
  static std::string* const probe_why = new std::string;
  static const int count = ProbeGpusInChild(probe_why);
  *why = *probe_why;
  return count;
}

#define SKIP_WITH_FEWER_GPUS(n)                                               \
  do {                                                                        \
    std::string why;                                                          \
    const int gpus = CountGpusInChild(&why);                                  \
    if (gpus < (n)) {                                                         \
      const std::string reason =                                              \
          gpus == 0 ? absl::StrCat("no usable GPU (", why, ")")               \
                    : absl::StrCat("needs ", (n), " GPUs, this machine has ", \
                                   gpus,                                      \
                                   " (NCCL refuses two ranks on one GPU: "    \
                                   "Duplicate GPU detected)");                \
      std::printf("SKIPPED: %s\n", reason.c_str());                           \
      GTEST_SKIP() << reason;                                                 \
    }                                                                         \
  } while (0)

std::vector<float> Data(int rank, int64_t n) {
  std::vector<float> data(n);
  for (int64_t i = 0; i < n; ++i) {
    data[i] = std::sin(0.37f * i + rank) * (1.0f + rank) / 3.0f;
  }
  return data;
}

absl::StatusOr<std::unique_ptr<NcclGradientReducer>> OneRank(RingDtype dtype) {
  absl::StatusOr<std::string> id = NcclGradientReducer::NewUniqueId();
  if (!id.ok()) return id.status();
  NcclGradientReducerOptions options;
  options.unique_id = *id;
  options.dtype = dtype;
  options.timeout = absl::Seconds(60);
  return NcclGradientReducer::Create(options);
}

TEST(NcclGradientReducer, RefusesBadOptionsNamingThem) {
  NcclGradientReducerOptions options;
  options.unique_id = "short";
  absl::Status refused = NcclGradientReducer::Create(options).status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.message().find("unique id has 5 bytes"), std::string::npos)
      << refused;
  options.unique_id = std::string(NCCL_UNIQUE_ID_BYTES, '\0');
  options.rank = 2;
  options.num_ranks = 2;
  refused = NcclGradientReducer::Create(options).status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.message().find("rank 2 is outside [0, 2)"),
            std::string::npos)
      << refused;
}

TEST(NcclGradientReducer, OneRankKeepsFloat32AndRoundsBf16) {
  SKIP_WITH_FEWER_GPUS(1);
  auto reducer = OneRank(RING_DTYPE_FLOAT32);
  ASSERT_TRUE(reducer.ok()) << reducer.status();
  std::vector<float> a = Data(0, 1000), b = Data(1, 37);
  const std::vector<float> a0 = a, b0 = b;
  ASSERT_TRUE((*reducer)->AllReduce(5, {absl::MakeSpan(a), absl::MakeSpan(b)})
                  .ok());
  EXPECT_EQ(a, a0);
  EXPECT_EQ(b, b0);
  // Ids strictly increase.
  EXPECT_EQ((*reducer)->AllReduce(5, {absl::MakeSpan(a)}).code(),
            absl::StatusCode::kInvalidArgument);
  (*reducer)->Shutdown();
  EXPECT_FALSE((*reducer)->AllReduce(6, {absl::MakeSpan(a)}).ok());

  auto bf16 = OneRank(RING_DTYPE_BFLOAT16);
  ASSERT_TRUE(bf16.ok()) << bf16.status();
  ASSERT_TRUE((*bf16)->AllReduce(1, {absl::MakeSpan(a), absl::MakeSpan(b)})
                  .ok());
  for (size_t i = 0; i < a.size(); ++i) ASSERT_EQ(a[i], RoundToBf16(a0[i]));
  for (size_t i = 0; i < b.size(); ++i) ASSERT_EQ(b[i], RoundToBf16(b0[i]));
}

VariableDef Def(const std::string& name, std::vector<int64_t> shape) {
  VariableDef def;
  def.set_name(name);
  def.set_dtype(DT_FLOAT);
  for (int64_t d : shape) def.mutable_shape()->add_dims(d);
  def.mutable_initializer()->mutable_random_uniform()->set_minval(-1);
  def.mutable_initializer()->mutable_random_uniform()->set_maxval(1);
  def.mutable_initializer()->set_seed(7);
  return def;
}

std::vector<float> Values(worker::LocalReplica& replica,
                          const VariableDef& def) {
  std::vector<int64_t> shape(def.shape().dims().begin(),
                             def.shape().dims().end());
  Tensor t = *Tensor::Create(DT_FLOAT, shape);
  EXPECT_TRUE(replica.PullDense(0, {{def.name(), &t}}).ok());
  return std::vector<float>(t.flat<float>().begin(), t.flat<float>().end());
}

// A replica whose all-reduce is a one-rank NCCL communicator trains as one
// whose all-reduce is the CPU ring (of one): buckets, the overlap's
// GradientReady and the division by the global batch run the same.
TEST(NcclGradientReducer, DrivesALocalReplicaAsTheRingDoes) {
  SKIP_WITH_FEWER_GPUS(1);
  auto nccl = OneRank(RING_DTYPE_FLOAT32);
  ASSERT_TRUE(nccl.ok()) << nccl.status();
  RingParticipantOptions ring_options;
  ring_options.peers = {
      absl::StrCat("127.0.0.1:", pstrain::testing::PickFreePort())};
  auto ring = RingParticipant::Start(ring_options);
  ASSERT_TRUE(ring.ok()) << ring.status();
  const std::vector<VariableDef> defs = {Def("a", {40, 9}),
                                                 Def("b", {9}), Def("c", {9, 3})};
  std::vector<std::unique_ptr<worker::LocalReplica>> replicas;
  for (AllReducer* reducer :
       {static_cast<AllReducer*>(nccl->get()),
        static_cast<AllReducer*>((*ring)->ring())}) {
    worker::LocalReplicaOptions options;
    options.variables = defs;
    options.optimizer.set_learning_rate(0.5f);
    options.optimizer.mutable_sgd();
    options.ring = reducer;
    options.num_workers = 2;  // the global batch: twice this one's
    options.bucket_bytes = 64;
    auto replica = worker::LocalReplica::Create(options);
    ASSERT_TRUE(replica.ok()) << replica.status();
    replicas.push_back(*std::move(replica));
  }
  for (int64_t step = 0; step < 3; ++step) {
    for (auto& replica : replicas) {
      std::vector<Tensor> grads;
      std::map<std::string, Tensor*> by_name;
      grads.reserve(defs.size());
      for (size_t v = 0; v < defs.size(); ++v) {
        grads.push_back(*Tensor::Create(
            DT_FLOAT, std::vector<int64_t>(defs[v].shape().dims().begin(),
                                           defs[v].shape().dims().end())));
        const std::vector<float> values =
            Data(static_cast<int>(step + v), grads.back().num_elements());
        std::copy(values.begin(), values.end(),
                  grads.back().flat<float>().begin());
        by_name[defs[v].name()] = &grads.back();
      }
      // The last variable reported early, as a backend's backward does.
      replica->GradientReady(step, "c", grads[2].flat<float>());
      replica->set_step(step, {});
      ASSERT_TRUE(replica->PushDense(step, 4, by_name).ok());
    }
  }
  worker::LocalReplicaOptions fresh_options;
  fresh_options.variables = defs;
  fresh_options.optimizer.mutable_sgd();
  auto fresh = worker::LocalReplica::Create(fresh_options);
  ASSERT_TRUE(fresh.ok()) << fresh.status();
  for (const VariableDef& def : defs) {
    const std::vector<float> trained = Values(*replicas[0], def);
    EXPECT_EQ(trained, Values(*replicas[1], def)) << def.name();
    // They did train: not the initial values.
    EXPECT_NE(trained, Values(**fresh, def)) << def.name();
  }
}

// Writes all of `bytes` to `fd`, reads exactly `n` bytes from it.
bool WriteAll(int fd, const void* bytes, size_t n) {
  const char* p = static_cast<const char*>(bytes);
  while (n > 0) {
    const ssize_t w = write(fd, p, n);
    if (w <= 0) return false;
    p += w;
    n -= w;
  }
  return true;
}
bool ReadAll(int fd, void* bytes, size_t n) {
  char* p = static_cast<char*>(bytes);
  while (n > 0) {
    const ssize_t r = read(fd, p, n);
    if (r <= 0) return false;
    p += r;
    n -= r;
  }
  return true;
}

constexpr int64_t kCount = 100003;  // not a multiple of anything

// One rank of the two-process test, in a child: all-reduces Data(rank) as
// two tensors in float32, then in bfloat16, and writes both results to
// `out` (or an error line). Rank 0 makes the id and sends it on `id_fd`;
// rank 1 reads it there.
void RunRank(int rank, int id_fd, int out) {
  std::string id(NCCL_UNIQUE_ID_BYTES, '\0');
  if (rank == 0) {
    absl::StatusOr<std::string> made = NcclGradientReducer::NewUniqueId();
    if (!made.ok()) _exit(2);
    id = *made;
    if (!WriteAll(id_fd, id.data(), id.size())) _exit(3);
  } else if (!ReadAll(id_fd, id.data(), id.size())) {
    _exit(3);
  }
  std::vector<float> results;
  for (RingDtype dtype : {RING_DTYPE_FLOAT32, RING_DTYPE_BFLOAT16}) {
    NcclGradientReducerOptions options;
    options.gpu = rank;
    options.rank = rank;
    options.num_ranks = 2;
    options.unique_id = id;
    options.dtype = dtype;
    options.timeout = absl::Seconds(60);
    auto reducer = NcclGradientReducer::Create(options);
    if (!reducer.ok()) {
      std::fprintf(stderr, "rank %d: %s\n", rank,
                   std::string(reducer.status().message()).c_str());
      _exit(4);
    }
    std::vector<float> data = Data(rank, kCount);
    absl::Span<float> all = absl::MakeSpan(data);
    absl::Status reduced = (*reducer)->AllReduce(
        1, {all.subspan(0, 1000), all.subspan(1000)});
    if (!reduced.ok()) {
      std::fprintf(stderr, "rank %d: %s\n", rank,
                   std::string(reduced.message()).c_str());
      _exit(5);
    }
    results.insert(results.end(), data.begin(), data.end());
    // The next communicator needs a fresh id: rank 0 makes and sends it.
    if (dtype == RING_DTYPE_FLOAT32) {
      if (rank == 0) {
        absl::StatusOr<std::string> made = NcclGradientReducer::NewUniqueId();
        if (!made.ok()) _exit(2);
        id = *made;
        if (!WriteAll(id_fd, id.data(), id.size())) _exit(3);
      } else if (!ReadAll(id_fd, id.data(), id.size())) {
        _exit(3);
      }
    }
  }
  if (!WriteAll(out, results.data(), results.size() * sizeof(float))) {
    _exit(6);
  }
  _exit(0);
}

// One rank of TwoProcessesSumAsTheCpuRing, exec'd by it with
// PSTRAIN_NCCL_TEST_RANK=<rank>,<id fd>,<result fd>.
TEST(NcclGradientReducer, DISABLED_RankProcess) {
  const char* env = std::getenv("PSTRAIN_NCCL_TEST_RANK");
  int rank = -1, id_fd = -1, out_fd = -1;
  if (env == nullptr ||
      std::sscanf(env, "%d,%d,%d", &rank, &id_fd, &out_fd) != 3) {
    GTEST_SKIP() << "run by TwoProcessesSumAsTheCpuRing only";
  }
  RunRank(rank, id_fd, out_fd);
}

TEST(NcclGradientReducer, TwoProcessesSumAsTheCpuRing) {
  SKIP_WITH_FEWER_GPUS(2);
  int id_pipe[2], out[2][2];
  ASSERT_EQ(pipe(id_pipe), 0);
  std::vector<pid_t> pids;
  for (int rank = 0; rank < 2; ++rank) {
    ASSERT_EQ(pipe(out[rank]), 0);
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      close(out[rank][0]);
      // Only the end this rank uses: a rank 1 whose rank 0 died reads EOF.
      close(rank == 0 ? id_pipe[0] : id_pipe[1]);
      // This process has used CUDA (the one-GPU tests): the rank runs in
      // a fresh image of the test, DISABLED_RankProcess below.
      const std::string env = absl::StrCat(
          rank, ",", rank == 0 ? id_pipe[1] : id_pipe[0], ",", out[rank][1]);
      setenv("PSTRAIN_NCCL_TEST_RANK", env.c_str(), 1);
      execl("/proc/self/exe", "nccl_gradient_reducer_cuda_test",
            "--gtest_filter=NcclGradientReducer.DISABLED_RankProcess",
            "--gtest_also_run_disabled_tests", static_cast<char*>(nullptr));
      _exit(7);
    }
    close(out[rank][1]);
    pids.push_back(pid);
  }
  close(id_pipe[0]);
  close(id_pipe[1]);
  std::vector<std::vector<float>> got(2, std::vector<float>(2 * kCount));
  for (int rank = 0; rank < 2; ++rank) {
    EXPECT_TRUE(ReadAll(out[rank][0], got[rank].data(),
                        got[rank].size() * sizeof(float)))
        << "rank " << rank << " wrote no result";
    close(out[rank][0]);
  }
  for (int rank = 0; rank < 2; ++rank) {
    int status = 0;
    waitpid(pids[rank], &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
        << "rank " << rank << " exited with " << status;
  }

  // The CPU ring's sums of the same data, float32 then bfloat16.
  std::vector<std::unique_ptr<RingParticipant>> ring;
  std::vector<std::string> peers;
  for (int r = 0; r < 2; ++r) {
    peers.push_back(
        absl::StrCat("127.0.0.1:", pstrain::testing::PickFreePort()));
  }
  for (int r = 0; r < 2; ++r) {
    RingParticipantOptions options;
    options.rank = r;
    options.peers = peers;
    auto started = RingParticipant::Start(options);
    ASSERT_TRUE(started.ok()) << started.status();
    ring.push_back(*std::move(started));
  }
  std::vector<std::vector<float>> want(2);
  for (RingDtype dtype : {RING_DTYPE_FLOAT32, RING_DTYPE_BFLOAT16}) {
    std::vector<std::vector<float>> data = {Data(0, kCount), Data(1, kCount)};
    std::vector<absl::Status> reduced(2);
    std::vector<std::thread> threads;
    for (int r = 0; r < 2; ++r) {
      ASSERT_TRUE(ring[r]->ring()->SetDtype(dtype).ok());
      threads.emplace_back([&, r] {
        reduced[r] = ring[r]->ring()->AllReduce(
            dtype == RING_DTYPE_FLOAT32 ? 1 : 2, absl::MakeSpan(data[r]));
      });
    }
    for (auto& t : threads) t.join();
    for (int r = 0; r < 2; ++r) ASSERT_TRUE(reduced[r].ok()) << reduced[r];
    ASSERT_EQ(data[0], data[1]);
    want[dtype == RING_DTYPE_FLOAT32 ? 0 : 1] = data[0];
  }
  for (int rank = 0; rank < 2; ++rank) {
    // float32: a sum of two terms is exact to the rounding, in any order:
    // bit for bit the ring's.
    for (int64_t i = 0; i < kCount; ++i) {
      ASSERT_EQ(got[rank][i], want[0][i]) << "rank " << rank << " at " << i;
    }
    // bfloat16: both round differently (the ring adds a rounded partial
    // sum to a float32, NCCL two rounded terms), each within two roundings
    // (2^-8 each) of the float32 sum's magnitude.
    const std::vector<float> a = Data(0, kCount), b = Data(1, kCount);
    for (int64_t i = 0; i < kCount; ++i) {
      const float bf16 = got[rank][kCount + i];
      const float tolerance = (std::fabs(a[i]) + std::fabs(b[i])) * 0.0079f;
      ASSERT_NEAR(bf16, want[0][i], tolerance) << "rank " << rank << " at " << i;
      ASSERT_NEAR(want[1][i], want[0][i], tolerance) << "ring at " << i;
      ASSERT_EQ(bf16, RoundToBf16(bf16)) << "not a bfloat16 at " << i;
    }
    EXPECT_EQ(got[rank], got[0]) << "ranks differ";
  }
}

}  // namespace
}  // namespace collective
}  // namespace pstrain
