// The ring all-reduce between real processes: bench/allreduce_throughput in
// --verify mode, one process per rank on 127.0.0.1 (ports picked at run
// time). Every process checks every round's sum; one killed with SIGKILL
// mid-run makes the others fail, naming it, instead of hanging.
#include <signal.h>

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "tests/subprocess.h"

namespace pstrain {
namespace testing {
namespace {

std::vector<std::string> Peers(int size) {
  std::vector<std::string> peers;
  for (int i = 0; i < size; ++i) {
    peers.push_back(absl::StrCat("127.0.0.1:", PickFreePort()));
  }
  return peers;
}

std::vector<Subprocess> StartRanks(const std::vector<std::string>& peers,
                                   const std::vector<std::string>& args,
                                   const std::string& name) {
  std::vector<Subprocess> ranks;
  for (size_t r = 0; r < peers.size(); ++r) {
    std::vector<std::string> all = {absl::StrCat("--rank=", r),
                                    "--peers=" + absl::StrJoin(peers, ","),
                                    "--verify"};
    all.insert(all.end(), args.begin(), args.end());
    ranks.push_back(Subprocess::Start("bench/allreduce_throughput", all, {},
                                      TempPath(absl::StrCat(name, r, ".log"))));
  }
  return ranks;
}

TEST(AllReduceProcesses, ThreeProcessesSumCorrectlyInFloat32AndBfloat16) {
  for (const std::string dtype : {"float32", "bf16"}) {
    std::vector<Subprocess> ranks =
        StartRanks(Peers(3),
                   {"--sizes_mb=0.001,3", "--rounds=3", "--warmup=1",
                    "--chunk_kb=256", "--dtype=" + dtype},
                   dtype);
    for (size_t r = 0; r < ranks.size(); ++r) {
      EXPECT_EQ(ranks[r].Wait(120), 0) << ReadFile(ranks[r].log_path());
      EXPECT_TRUE(absl::StrContains(ReadFile(ranks[r].log_path()),
                                    "every sum verified"))
          << ReadFile(ranks[r].log_path());
    }
    EXPECT_TRUE(absl::StrContains(ReadFile(ranks[0].log_path()),
                                  "impl=ring ranks=3 mb=3"));
  }
}

TEST(AllReduceProcesses, AKilledProcessMakesTheOthersFailNamingIt) {
  const std::vector<std::string> peers = Peers(3);
  std::vector<Subprocess> ranks = StartRanks(
      peers, {"--sizes_mb=1", "--rounds=1000000", "--timeout_s=3"}, "kill");
  // Mid-run: rank 0 has verified a few rounds.
  const absl::Time give_up = absl::Now() + absl::Seconds(60);
  while (!absl::StrContains(ReadFile(ranks[0].log_path()),
                            "round 3 verified") &&
         absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(50));
  }
  ASSERT_TRUE(
      absl::StrContains(ReadFile(ranks[0].log_path()), "round 3 verified"))
      << ReadFile(ranks[0].log_path());
  EXPECT_EQ(ranks[2].Stop(SIGKILL), 128 + SIGKILL);
  for (int r = 0; r < 2; ++r) {
    // Exits by itself, with the error (Wait gives up, and the test fails,
    // after 30 s: ten times the all-reduce's timeout).
    EXPECT_EQ(ranks[r].Wait(30), 1) << ReadFile(ranks[r].log_path());
    const std::string log = ReadFile(ranks[r].log_path());
    EXPECT_TRUE(absl::StrContains(log, peers[2])) << "rank " << r << ": "
                                                  << log;
    EXPECT_TRUE(absl::StrContains(log, "UNAVAILABLE") ||
                absl::StrContains(log, "DEADLINE_EXCEEDED"))
        << log;
  }
}

}  // namespace
}  // namespace testing
}  // namespace pstrain
