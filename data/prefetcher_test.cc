#include "data/prefetcher.h"

#include <chrono>
#include <memory>
#include <set>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace pstrain {
namespace data {
namespace {

// uint8 images [n, 2, 3], pixel j of image i = (i * 7 + j) % 256; label i % 5.
Dataset Images(int64_t n) {
  Dataset d;
  d.features = Tensor::Create(DT_UINT8, {n, 2, 3}).value();
  for (int64_t i = 0; i < n * 6; ++i) {
    d.features.data<uint8_t>()[i] =
        static_cast<uint8_t>((i / 6 * 7 + i % 6) % 256);
  }
  for (int64_t i = 0; i < n; ++i)
    d.labels.push_back(static_cast<int32_t>(i % 5));
  d.num_classes = 5;
  return d;
}

ShardPlan Plan(int64_t n, int workers, int worker, int64_t batch,
               bool drop = false) {
  ShardOptions options;
  options.num_workers = workers;
  options.worker_index = worker;
  options.batch_size = batch;
  options.drop_remainder = drop;
  options.seed = 5;
  return ShardPlan::Create(n, options).value();
}

std::unique_ptr<Prefetcher> Start(const Dataset& d, const ShardPlan& plan,
                                  PrefetchOptions options) {
  absl::StatusOr<std::unique_ptr<Prefetcher>> p =
      Prefetcher::Create(&d, plan, options);
  EXPECT_TRUE(p.ok()) << p.status();
  return p.ok() ? *std::move(p) : nullptr;
}

TEST(Prefetcher, DeliversTheShardsBatchesInOrderWithScaledValues) {
  const Dataset d = Images(29);
  for (int worker = 0; worker < 3; ++worker) {
    const ShardPlan plan = Plan(29, 3, worker, 4);  // Last batches 2, 2, 1.
    PrefetchOptions options;
    options.first_epoch = 3;
    options.num_epochs = 2;
    std::unique_ptr<Prefetcher> p = Start(d, plan, options);
    ASSERT_NE(p, nullptr);
    for (int64_t epoch = 3; epoch < 5; ++epoch) {
      const std::vector<int64_t> order = plan.WorkerOrder(epoch);
      size_t begin = 0;
      for (int64_t step = 0; step < plan.steps_per_epoch(); ++step) {
        absl::StatusOr<Batch*> batch = p->Next();
        ASSERT_TRUE(batch.ok()) << batch.status();
        const Batch& b = **batch;
        const int64_t rows = plan.BatchSize(step);
        EXPECT_EQ(b.epoch, epoch);
        EXPECT_EQ(b.step, step);
        EXPECT_EQ(b.end_of_epoch, step == plan.steps_per_epoch() - 1);
        EXPECT_EQ(b.indices,
                  std::vector<int64_t>(order.begin() + begin,
                                       order.begin() + begin + rows));
        begin += rows;
        EXPECT_EQ(b.features.shape(), (std::vector<int64_t>{rows, 2, 3}));
        EXPECT_EQ(b.labels.shape(), (std::vector<int64_t>{rows}));
        for (int64_t r = 0; r < rows; ++r) {
          const int64_t index = b.indices[r];
          EXPECT_EQ(b.labels.data<int32_t>()[r], index % 5);
          for (int64_t j = 0; j < 6; ++j) {
            EXPECT_EQ(b.features.data<float>()[r * 6 + j],
                      static_cast<float>((index * 7 + j) % 256) / 255.0f);
          }
        }
        p->Release(*batch);
      }
      EXPECT_EQ(begin, order.size());
    }
    EXPECT_EQ(p->Next().status().code(), absl::StatusCode::kOutOfRange);
    EXPECT_EQ(p->Next().status().message(),
              "end of data: epochs 3 to 4 are done");
  }
}

TEST(Prefetcher, EmptyLastBatchKeepsWorkersInStep) {
  const Dataset d = Images(25);  // W = 3, B = 4: step 2 has 1 example.
  std::unique_ptr<Prefetcher> p =
      Start(d, Plan(25, 3, 1, 4), PrefetchOptions());
  ASSERT_NE(p, nullptr);
  for (int step = 0; step < 3; ++step) {
    absl::StatusOr<Batch*> batch = p->Next();
    ASSERT_TRUE(batch.ok()) << batch.status();
    EXPECT_EQ((*batch)->size(), step < 2 ? 4 : 0);
    EXPECT_EQ((*batch)->features.shape()[0], step < 2 ? 4 : 0);
    p->Release(*batch);
  }
  EXPECT_EQ(p->Next().status().code(), absl::StatusCode::kOutOfRange);
}

TEST(Prefetcher, CopiesFloatFeaturesUnchanged) {
  Dataset d;
  d.features = Tensor::Create(DT_FLOAT, {3, 2}).value();
  for (int i = 0; i < 6; ++i) d.features.data<float>()[i] = 10.5f * i;
  d.labels = {0, 1, 0};
  d.num_classes = 2;
  ShardOptions options;
  options.batch_size = 3;
  options.shuffle = false;
  std::unique_ptr<Prefetcher> p =
      Start(d, ShardPlan::Create(3, options).value(), PrefetchOptions());
  ASSERT_NE(p, nullptr);
  absl::StatusOr<Batch*> batch = p->Next();
  ASSERT_TRUE(batch.ok()) << batch.status();
  const auto values = (*batch)->features.flat<float>();
  EXPECT_EQ(std::vector<float>(values.begin(), values.end()),
            (std::vector<float>{0, 10.5, 21, 31.5, 42, 52.5}));
  p->Release(*batch);
}

TEST(Prefetcher, BatchesIdsAsInt32) {
  Dataset d;
  d.features = Tensor::Create(DT_INT32, {3, 2}).value();
  for (int i = 0; i < 6; ++i) d.features.data<int32_t>()[i] = 7 * i;
  d.labels = {0, 1, 0};
  d.num_classes = 2;
  ShardOptions options;
  options.batch_size = 3;
  options.shuffle = false;
  std::unique_ptr<Prefetcher> p =
      Start(d, ShardPlan::Create(3, options).value(), PrefetchOptions());
  ASSERT_NE(p, nullptr);
  absl::StatusOr<Batch*> batch = p->Next();
  ASSERT_TRUE(batch.ok()) << batch.status();
  ASSERT_EQ((*batch)->features.dtype(), DT_INT32);
  const int32_t* ids = (*batch)->features.data<int32_t>();
  EXPECT_EQ(std::vector<int32_t>(ids, ids + 6),
            (std::vector<int32_t>{0, 7, 14, 21, 28, 35}));
  p->Release(*batch);
}

TEST(Prefetcher, RecyclesAFixedSetOfBuffers) {
  const Dataset d = Images(100);
  PrefetchOptions options;
  options.num_epochs = 5;
  std::unique_ptr<Prefetcher> p = Start(d, Plan(100, 1, 0, 8), options);
  ASSERT_NE(p, nullptr);
  std::set<const void*> batches, buffers;
  int count = 0;
  for (absl::StatusOr<Batch*> b = p->Next(); b.ok(); b = p->Next(), ++count) {
    batches.insert(*b);
    buffers.insert((*b)->features.raw_data());
    p->Release(*b);
  }
  EXPECT_EQ(count, 5 * 13);
  // queue_depth + 2 full batches, and 2 of the last batch's 4 rows.
  EXPECT_LE(batches.size(), 6u);
  EXPECT_EQ(buffers.size(), batches.size());
}

TEST(Prefetcher, DestroyingEarlyStopsTheThread) {
  const Dataset d = Images(1000);
  PrefetchOptions forever;
  forever.num_epochs = PrefetchOptions::kRepeatForever;
  // Never consumed: the thread fills the queue, blocks, and is stopped.
  std::unique_ptr<Prefetcher> idle = Start(d, Plan(1000, 2, 0, 10), forever);
  ASSERT_NE(idle, nullptr);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  idle.reset();
  // Stopped mid-epoch while the caller still holds a batch.
  std::unique_ptr<Prefetcher> p = Start(d, Plan(1000, 2, 0, 10), forever);
  ASSERT_NE(p, nullptr);
  absl::StatusOr<Batch*> held = p->Next();
  ASSERT_TRUE(held.ok()) << held.status();
  EXPECT_EQ((*held)->step, 0);
  p.reset();  // Returns: a hang here times the test out.
  EXPECT_EQ(p, nullptr);
}

TEST(Prefetcher, HoldingEveryBufferIsAnErrorNotADeadlock) {
  const Dataset d = Images(100);
  PrefetchOptions options;
  options.queue_depth = 1;  // 3 buffers.
  std::unique_ptr<Prefetcher> p = Start(d, Plan(100, 1, 0, 10), options);
  ASSERT_NE(p, nullptr);
  std::vector<Batch*> held;
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<Batch*> b = p->Next();
    ASSERT_TRUE(b.ok()) << b.status();
    held.push_back(*b);
  }
  absl::Status status = p->Next().status();
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(status.message(),
            "the caller holds all 3 batch buffers of 10 rows; Release one "
            "before calling Next again");
  p->Release(held[0]);
  absl::StatusOr<Batch*> next = p->Next();
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_EQ((*next)->step, 3);
}

TEST(Prefetcher, CreateRefusesMismatchedOrEmptyPlans) {
  const Dataset d = Images(10);
  EXPECT_EQ(Prefetcher::Create(&d, Plan(11, 1, 0, 2), PrefetchOptions())
                .status()
                .message(),
            "Prefetcher: dataset has 10 examples but the shard plan was made "
            "for 11");
  EXPECT_EQ(Prefetcher::Create(&d, Plan(10, 3, 0, 4, /*drop=*/true),
                               PrefetchOptions())
                .status()
                .message(),
            "Prefetcher: the shard plan has no steps: 10 examples give no "
            "batch of 4 for each of 3 workers with drop_remainder");
  PrefetchOptions options;
  options.queue_depth = 0;
  EXPECT_EQ(Prefetcher::Create(&d, Plan(10, 1, 0, 2), options).status().code(),
            absl::StatusCode::kInvalidArgument);
  Dataset bad = Images(10);
  bad.labels[4] = 7;
  EXPECT_EQ(Prefetcher::Create(&bad, Plan(10, 1, 0, 2), PrefetchOptions())
                .status()
                .message(),
            "dataset label 7 at index 4 is outside 0..4");
}

}  // namespace
}  // namespace data
}  // namespace pstrain
