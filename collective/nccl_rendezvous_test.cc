// NcclRendezvous without a GPU: its options, the wait for worker 0's id, and
// that the id fetched for the asked generation is the one joined with.
#include "collective/nccl_rendezvous.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace pstrain {
namespace collective {
namespace {

NcclRendezvousOptions Rank1(std::vector<int64_t>* asked, std::string id) {
  NcclRendezvousOptions options;
  options.rank = 1;
  options.num_ranks = 2;
  options.timeout = absl::Milliseconds(300);
  options.poll = absl::Milliseconds(5);
  options.fetch = [asked, id](int64_t generation) {
    asked->push_back(generation);
    return absl::StatusOr<std::string>(id);
  };
  return options;
}

TEST(NcclRendezvous, RefusesBadOptionsNamingThem) {
  std::vector<int64_t> asked;
  NcclRendezvousOptions options = Rank1(&asked, "");
  options.fetch = nullptr;
  absl::Status refused = NcclRendezvous::Create(options).status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.message().find("rank 1 needs a fetch function"),
            std::string::npos)
      << refused;
  options = Rank1(&asked, "");
  options.rank = 2;
  refused = NcclRendezvous::Create(options).status();
  EXPECT_NE(refused.message().find("rank 2 is outside [0, 2)"),
            std::string::npos)
      << refused;
  options.rank = 0;  // rank 0 publishes
  refused = NcclRendezvous::Create(options).status();
  EXPECT_NE(refused.message().find("rank 0 needs a publish function"),
            std::string::npos)
      << refused;
}

#ifdef PSTRAIN_WITH_CUDA
TEST(NcclRendezvous, WaitsForTheIdOfItsGenerationThenJoinsWithIt) {
  std::vector<int64_t> asked;
  auto rendezvous = NcclRendezvous::Create(Rank1(&asked, ""));
  ASSERT_TRUE(rendezvous.ok()) << rendezvous.status();
  float x = 1;
  EXPECT_EQ((*rendezvous)->AllReduce(1, {absl::MakeSpan(&x, 1)}).code(),
            absl::StatusCode::kFailedPrecondition);
  // Worker 0 never publishes: the join gives up.
  absl::Status joined = (*rendezvous)->Join(3);
  EXPECT_EQ(joined.code(), absl::StatusCode::kDeadlineExceeded) << joined;
  EXPECT_NE(joined.message().find("generation 3"), std::string::npos);
  ASSERT_GE(asked.size(), 2u);
  for (int64_t g : asked) EXPECT_EQ(g, 3);
  // An id is there: it goes to NCCL (refused here for its size, before any
  // GPU is touched).
  asked.clear();
  rendezvous = NcclRendezvous::Create(Rank1(&asked, "not-an-nccl-id"));
  ASSERT_TRUE(rendezvous.ok());
  joined = (*rendezvous)->Join(4);
  EXPECT_EQ(joined.code(), absl::StatusCode::kInvalidArgument) << joined;
  EXPECT_NE(joined.message().find("unique id has 14 bytes"), std::string::npos)
      << joined;
  EXPECT_EQ(asked, std::vector<int64_t>{4});
  // A fetch that fails fails the join as it is.
  NcclRendezvousOptions failing = Rank1(&asked, "");
  failing.fetch = [](int64_t) {
    return absl::StatusOr<std::string>(absl::UnavailableError("chief gone"));
  };
  rendezvous = NcclRendezvous::Create(failing);
  ASSERT_TRUE(rendezvous.ok());
  EXPECT_EQ((*rendezvous)->Join(0).code(), absl::StatusCode::kUnavailable);
  (*rendezvous)->Shutdown();
  EXPECT_EQ((*rendezvous)->Join(1).code(),
            absl::StatusCode::kFailedPrecondition);
}
#else
TEST(NcclRendezvous, IsUnimplementedWithoutCuda) {
  std::vector<int64_t> asked;
  EXPECT_EQ(NcclRendezvous::Create(Rank1(&asked, "")).status().code(),
            absl::StatusCode::kUnimplemented);
}
#endif

}  // namespace
}  // namespace collective
}  // namespace pstrain
