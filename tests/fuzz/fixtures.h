// The small, fixed state the request fuzzers feed their requests to, shared
// with make_seeds.cc so that seeds are valid requests for it.
#ifndef PSTRAIN_TESTS_FUZZ_FIXTURES_H_
#define PSTRAIN_TESTS_FUZZ_FIXTURES_H_

#include <cstdint>
#include <string>

#include "proto/ps_service.pb.h"
#include "proto/training.pb.h"

namespace pstrain {
namespace fuzz {

// The run id of every fixture; seeds' headers carry it.
inline constexpr char kRunId[] = "fuzz-run";

// The CreateVariablesRequest of ps task 0 of 2, built from `mode` (the first
// byte of a ps fuzz input): bit 0 sync (else async), bits 1-2 the optimizer
// (SGD, momentum, Adagrad, Adam), bits 3-4 the NaN policy. Variables, with
// their pieces on ps 0:
//   "dense/kernel" [4, 3]  ROW_RANGES, rows [0, 2) here, [2, 4) on ps 1
//   "dense/bias"   [3]     WHOLE here
//   "scalar"       []      WHOLE here
//   "emb"          [10, 2] sparse ROW_RANGES, rows [0, 5) here
//   "hashed"       [0, 2]  sparse ROW_HASH (grows), bucket 0 of 2 here
// Two workers, staleness bound 3 (async), step timeout 1 ms.
CreateVariablesRequest ShardFixture(uint8_t mode);

// The TF_CONFIG of the chief fuzzer's cluster: chief 0, ps 0-1, workers 0-2,
// evaluator 0.
inline constexpr char kChiefTfConfig[] =
    R"({"cluster": {"chief": ["c:1"], "ps": ["p0:1", "p1:1"],)"
    R"( "worker": ["w0:1", "w1:1", "w2:1"], "evaluator": ["e:1"]},)"
    R"( "task": {"type": "chief", "index": 0}})";

// The chief fixture's training config: sync, 3 workers, batch 32.
TrainingConfig ChiefFixtureConfig();

}  // namespace fuzz
}  // namespace pstrain

#endif  // PSTRAIN_TESTS_FUZZ_FIXTURES_H_
