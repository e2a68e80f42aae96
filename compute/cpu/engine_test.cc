#include "compute/cpu/engine.h"

#include <omp.h>

#include <thread>

#include "gtest/gtest.h"

namespace pstrain {
namespace worker {
namespace cpu {
namespace {

TEST(Engine, RejectsNegativeThreadCount) {
  EngineOptions options;
  options.num_threads = -1;
  EXPECT_EQ(Engine::Create(options).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(Engine, DefaultThreadCountIsOpenMpDefault) {
  // A fresh thread sees the process's OpenMP default, untouched by other
  // tests.
  std::thread([] {
    const int openmp_default = omp_get_max_threads();
    absl::StatusOr<std::unique_ptr<Engine>> engine = Engine::Create({});
    ASSERT_TRUE(engine.ok()) << engine.status();
    EXPECT_EQ((*engine)->num_threads(), openmp_default);
  }).join();
}

TEST(Engine, UseThreadsSetsTheCallingThreadsOpenMpThreadCount) {
  EngineOptions options;
  options.num_threads = 1;
  absl::StatusOr<std::unique_ptr<Engine>> engine = Engine::Create(options);
  ASSERT_TRUE(engine.ok()) << engine.status();
  EXPECT_EQ((*engine)->num_threads(), 1);
  // libgomp keeps the count per thread: it must take effect on whichever
  // thread runs the ops.
  std::thread([&] {
    (*engine)->UseThreads();
    EXPECT_EQ(omp_get_max_threads(), 1);
  }).join();
  options.num_threads = 3;
  absl::StatusOr<std::unique_ptr<Engine>> three = Engine::Create(options);
  ASSERT_TRUE(three.ok()) << three.status();
  std::thread([&] {
    (*three)->UseThreads();
    EXPECT_EQ(omp_get_max_threads(), 3);
  }).join();
}

}  // namespace
}  // namespace cpu
}  // namespace worker
}  // namespace pstrain
