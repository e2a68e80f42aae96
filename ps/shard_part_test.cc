// Shard's pulls and pushes of a part of a dense variable (ps/dense_part.h):
// a tensor-parallel member's share, rows or columns, and the sync step's
// division of each element by the batches that covered it.
#include <cstring>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "ps/dense_part.h"
#include "ps/pull_reply.h"
#include "ps/shard.h"

namespace pstrain {
namespace ps {
namespace {

constexpr char kRun[] = "run-parts";

// This shard is ps 0 of two: "k" [4, 4] rows [0, 2) here and [2, 4) on ps 1,
// constant 1.0; "b" [4] whole here, constant 0.5. SGD with learning rate 1.
CreateVariablesRequest Create(UpdateConfig::Mode mode, int workers) {
  CreateVariablesRequest r;
  r.mutable_header()->set_run_id(kRun);
  r.set_ps_task(0);
  r.mutable_optimizer()->mutable_sgd();
  r.mutable_optimizer()->set_learning_rate(1.0);
  UpdateConfig* u = r.mutable_update();
  u->set_mode(mode);
  u->set_num_workers(workers);
  u->set_replicas_to_aggregate(workers);
  u->set_max_staleness(-1);
  u->set_step_timeout_ms(5000);
  auto add = [&r](const std::string& name, std::vector<int64_t> dims,
                  float init, std::vector<std::pair<int64_t, int64_t>> rows) {
    ShardVariable* v = r.add_variables();
    v->mutable_def()->set_name(name);
    v->mutable_def()->set_dtype(DT_FLOAT);
    for (int64_t d : dims) v->mutable_def()->mutable_shape()->add_dims(d);
    v->mutable_def()->mutable_initializer()->mutable_constant()->set_value(
        init);
    v->mutable_placement()->set_name(name);
    v->mutable_placement()->set_partitioning(rows.size() > 1
                                                 ? VariablePlacement::ROW_RANGES
                                                 : VariablePlacement::WHOLE);
    for (size_t i = 0; i < rows.size(); ++i) {
      auto* s = v->mutable_placement()->add_slices();
      s->set_ps_task(i);
      s->set_row_begin(rows[i].first);
      s->set_row_end(rows[i].second);
    }
  };
  add("k", {4, 4}, 1.0f, {{0, 2}, {2, 4}});
  add("b", {4}, 0.5f, {{0, 4}});
  return r;
}

VariablePart Part(const std::string& name, int dim, int64_t begin,
                  int64_t end) {
  VariablePart p;
  p.set_name(name);
  p.set_dim(dim);
  p.set_begin(begin);
  p.set_end(end);
  return p;
}

NamedTensor Gradient(const std::string& name, std::vector<int64_t> dims,
                     int64_t row_begin, int64_t row_end,
                     const std::vector<float>& values) {
  NamedTensor g;
  g.set_name(name);
  TensorProto* t = g.mutable_tensor();
  t->set_dtype(DT_FLOAT);
  for (int64_t d : dims) t->mutable_shape()->add_dims(d);
  t->mutable_slice()->set_begin(row_begin);
  t->mutable_slice()->set_end(row_end);
  t->set_content(values.data(), values.size() * 4);
  return g;
}

PushDenseRequest Push(int worker, int64_t batch) {
  PushDenseRequest p;
  p.mutable_header()->set_run_id(kRun);
  p.mutable_header()->mutable_sender()->set_job(JOB_WORKER);
  p.mutable_header()->mutable_sender()->set_index(worker);
  p.set_version(0);
  p.set_batch_size(batch);
  p.set_last(true);
  return p;
}

absl::StatusOr<PushDenseResponse> Send(Shard& shard,
                                       const PushDenseRequest& p) {
  const PushDenseRequest* messages[] = {&p};
  return shard.PushDense(messages);
}

// What a pull of `name` (with `part`, if given) sends: the values, and the
// header PullReply would put on them.
struct Pulled {
  absl::Status status;
  std::vector<float> values;
  NamedTensor header;
  int64_t version = -1;
};
Pulled Pull(Shard& shard, const std::string& name,
            const VariablePart* part = nullptr, int64_t min_version = 0) {
  PullDenseRequest r;
  r.mutable_header()->set_run_id(kRun);
  r.add_names(name);
  r.set_min_version(min_version);
  if (part != nullptr) *r.add_parts() = *part;
  Pulled out;
  out.status = shard.PullDense(
      r,
      [&](const DenseVariable& v, const DensePart* p, const ValueView& value) {
        out.values.resize(value.size / 4);
        if (value.size > 0)
          std::memcpy(out.values.data(), value.data, value.size);
        out.header = PullHeader(v, p);
        out.version = value.version;
      });
  return out;
}

std::vector<int64_t> Dims(const NamedTensor& t) {
  return {t.tensor().shape().dims().begin(), t.tensor().shape().dims().end()};
}

class ShardPartTest : public ::testing::Test {
 protected:
  void Init(UpdateConfig::Mode mode, int workers) {
    CreateVariablesResponse response;
    ASSERT_TRUE(shard_.CreateVariables(Create(mode, workers), &response).ok());
  }
  // One worker's whole push of k's rows [0, 2) = 0, 1, ..., 7 with batch 1:
  // k becomes 1 - i at element i.
  void SetDistinctValues() {
    PushDenseRequest p = Push(0, 1);
    std::vector<float> g(8);
    for (int i = 0; i < 8; ++i) g[i] = i;
    *p.add_gradients() = Gradient("k", {4, 4}, 0, 2, g);
    *p.add_gradients() = Gradient("b", {4}, 0, 4, {0, 0, 0, 0});
    ASSERT_TRUE(Send(shard_, p).ok());
  }
  void ExpectRefused(const PushDenseRequest& p, const std::string& text) {
    const std::vector<float> before = Pull(shard_, "k").values;
    absl::StatusOr<PushDenseResponse> r = Send(shard_, p);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument)
        << r.status();
    EXPECT_NE(r.status().message().find(text), std::string::npos)
        << r.status().message();
    EXPECT_EQ(Pull(shard_, "k").values, before);
  }

  Shard shard_{ShardOptions{}};
};

TEST_F(ShardPartTest, PullsColumnsOfItsRows) {
  Init(UpdateConfig::SYNC, 1);
  SetDistinctValues();
  const VariablePart columns = Part("k", 1, 1, 3);
  const Pulled got = Pull(shard_, "k", &columns, 1);
  ASSERT_TRUE(got.status.ok()) << got.status;
  EXPECT_EQ(got.values, (std::vector<float>{0, -1, -4, -5}));
  EXPECT_EQ(Dims(got.header), (std::vector<int64_t>{4, 2}));
  EXPECT_EQ(got.header.tensor().slice().begin(), 0);
  EXPECT_EQ(got.header.tensor().slice().end(), 2);
  EXPECT_EQ(got.version, 1);
}

TEST_F(ShardPartTest, PullsTheRowsOfAPartThatItHolds) {
  Init(UpdateConfig::SYNC, 1);
  SetDistinctValues();
  // Rows [1, 3) of k: this piece holds row 1, the part's row 0.
  const VariablePart rows = Part("k", 0, 1, 3);
  const Pulled got = Pull(shard_, "k", &rows);
  ASSERT_TRUE(got.status.ok()) << got.status;
  EXPECT_EQ(got.values, (std::vector<float>{-3, -4, -5, -6}));
  EXPECT_EQ(Dims(got.header), (std::vector<int64_t>{2, 4}));
  EXPECT_EQ(got.header.tensor().slice().begin(), 0);
  EXPECT_EQ(got.header.tensor().slice().end(), 1);
  // Rows [3, 4): none here, an empty value.
  const VariablePart elsewhere = Part("k", 0, 3, 4);
  const Pulled none = Pull(shard_, "k", &elsewhere);
  ASSERT_TRUE(none.status.ok()) << none.status;
  EXPECT_TRUE(none.values.empty());
  EXPECT_EQ(none.header.tensor().slice().begin(),
            none.header.tensor().slice().end());
}

TEST_F(ShardPartTest, RefusesMalformedPullParts) {
  Init(UpdateConfig::SYNC, 1);
  for (const VariablePart& bad :
       {Part("k", 1, 2, 5), Part("k", 2, 0, 1), Part("k", 0, 2, 2),
        Part("k", 0, -1, 1), Part("nope", 0, 0, 1)}) {
    const Pulled got = Pull(shard_, "k", &bad);
    EXPECT_EQ(got.status.code(), absl::StatusCode::kInvalidArgument)
        << bad.ShortDebugString() << ": " << got.status;
    EXPECT_NE(got.status.message().find(bad.name()), std::string::npos)
        << got.status;
  }
  // A part of a variable the request does not pull.
  const VariablePart of_b = Part("b", 0, 0, 2);
  EXPECT_EQ(Pull(shard_, "k", &of_b).status.code(),
            absl::StatusCode::kInvalidArgument);
}

// data:2,model:2: workers 0, 1 (group 0) and 2, 3 (group 1), each group on
// its batch of 2. Member 0 of a group pushes k's columns [0, 2), member 1
// columns [2, 4); b is replicated and pushed whole by all four. The step
// completes on the fourth push; k's elements are divided by the 4 examples
// of the two pushes that cover them, b's by all 8.
TEST_F(ShardPartTest, SyncStepDividesColumnPartsByTheBatchesCoveringThem) {
  Init(UpdateConfig::SYNC, 4);
  for (int worker = 0; worker < 4; ++worker) {
    const int member = worker % 2;
    PushDenseRequest p = Push(worker, 2);
    *p.add_parts() = Part("k", 1, 2 * member, 2 * member + 2);
    // Rows [0, 2) of the [4, 2] part: 2 * (worker + 1) everywhere.
    *p.add_gradients() =
        Gradient("k", {4, 2}, 0, 2, std::vector<float>(4, 2.0f * (worker + 1)));
    *p.add_gradients() =
        Gradient("b", {4}, 0, 4, std::vector<float>(4, 1.0f * worker));
    absl::StatusOr<PushDenseResponse> r = Send(shard_, p);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(Pull(shard_, "b").version, worker < 3 ? 0 : 1);
  }
  // Columns [0, 2): workers 0 and 2, (2 + 6) / 4 = 2; [2, 4): workers 1
  // and 3, (4 + 8) / 4 = 3.
  EXPECT_EQ(Pull(shard_, "k").values,
            (std::vector<float>{-1, -1, -2, -2, -1, -1, -2, -2}));
  // b: (0 + 1 + 2 + 3) / 8.
  EXPECT_EQ(Pull(shard_, "b").values, std::vector<float>(4, 0.5f - 0.75f));
}

// Row parts: worker 0 pushes k's rows [0, 2) (all of this piece), worker 1
// rows [2, 4) (none of it: an empty gradient that still counts for the
// step). Each row here is divided by worker 0's batch alone.
TEST_F(ShardPartTest, SyncStepCountsARowPartWithNoRowsHere) {
  Init(UpdateConfig::SYNC, 2);
  PushDenseRequest first = Push(0, 3);
  *first.add_parts() = Part("k", 0, 0, 2);
  *first.add_gradients() =
      Gradient("k", {2, 4}, 0, 2, std::vector<float>(8, 6.0f));
  ASSERT_TRUE(Send(shard_, first).ok());
  EXPECT_EQ(Pull(shard_, "k").version, 0);
  PushDenseRequest second = Push(1, 3);
  *second.add_parts() = Part("k", 0, 2, 4);
  *second.add_gradients() = Gradient("k", {2, 4}, 0, 0, {});
  absl::StatusOr<PushDenseResponse> r = Send(shard_, second);
  ASSERT_TRUE(r.ok()) << r.status();
  const Pulled k = Pull(shard_, "k", nullptr, 1);
  ASSERT_TRUE(k.status.ok()) << k.status;
  EXPECT_EQ(k.values, std::vector<float>(8, 1.0f - 2.0f));
}

// A step's sums start from zero, whatever the step before summed: a step of
// whole pushes, then one of row parts (SyncStepCountsARowPartWithNoRowsHere's).
TEST_F(ShardPartTest, SyncStepOfPartsAfterAWholeStepStartsFromZero) {
  Init(UpdateConfig::SYNC, 2);
  for (int worker = 0; worker < 2; ++worker) {
    PushDenseRequest whole = Push(worker, 1);
    *whole.add_gradients() =
        Gradient("k", {4, 4}, 0, 2, std::vector<float>(8, 5.0f));
    *whole.add_gradients() = Gradient("b", {4}, 0, 4, {0, 0, 0, 0});
    ASSERT_TRUE(Send(shard_, whole).ok());
  }
  // (5 + 5) / 2 = 5.
  ASSERT_EQ(Pull(shard_, "k", nullptr, 1).values,
            std::vector<float>(8, 1.0f - 5.0f));
  PushDenseRequest first = Push(0, 3);
  first.set_version(1);
  *first.add_parts() = Part("k", 0, 0, 2);
  *first.add_gradients() =
      Gradient("k", {2, 4}, 0, 2, std::vector<float>(8, 6.0f));
  ASSERT_TRUE(Send(shard_, first).ok());
  PushDenseRequest second = Push(1, 3);
  second.set_version(1);
  *second.add_parts() = Part("k", 0, 2, 4);
  *second.add_gradients() = Gradient("k", {2, 4}, 0, 0, {});
  ASSERT_TRUE(Send(shard_, second).ok());
  // 6 / 3 = 2.
  const Pulled k = Pull(shard_, "k", nullptr, 2);
  ASSERT_TRUE(k.status.ok()) << k.status;
  EXPECT_EQ(k.values, std::vector<float>(8, 1.0f - 5.0f - 2.0f));
}

TEST_F(ShardPartTest, RefusesMalformedPushParts) {
  Init(UpdateConfig::SYNC, 2);
  auto push = [](VariablePart part, std::vector<int64_t> dims, int64_t row_end,
                 size_t floats) {
    PushDenseRequest p = Push(0, 1);
    *p.add_parts() = part;
    *p.add_gradients() =
        Gradient("k", dims, 0, row_end, std::vector<float>(floats, 1.0f));
    return p;
  };
  ExpectRefused(push(Part("k", 1, 3, 5), {4, 2}, 2, 4), "outside its size 4");
  ExpectRefused(push(Part("k", 2, 0, 2), {4, 2}, 2, 4),
                "cuts one of its 2 dimensions (0 to 1), not 2");
  ExpectRefused(push(Part("k", 1, 2, 2), {4, 0}, 2, 0), "is empty");
  // The gradient is not of the part's shape, or not its rows here.
  ExpectRefused(push(Part("k", 1, 0, 2), {4, 4}, 2, 8), "part's [4, 2]");
  ExpectRefused(push(Part("k", 0, 1, 3), {2, 4}, 2, 8), "of the part");
  // A part with no gradient.
  PushDenseRequest no_gradient = Push(0, 1);
  *no_gradient.add_parts() = Part("k", 1, 0, 2);
  *no_gradient.add_gradients() = Gradient("b", {4}, 0, 4, {0, 0, 0, 0});
  ExpectRefused(no_gradient, "no gradient");
}

TEST_F(ShardPartTest, RefusesPartsInAsyncMode) {
  Init(UpdateConfig::ASYNC, 1);
  PushDenseRequest p = Push(0, 1);
  *p.add_parts() = Part("k", 1, 0, 2);
  *p.add_gradients() = Gradient("k", {4, 2}, 0, 2, std::vector<float>(4, 1));
  ExpectRefused(p, "needs sync mode");
}

TEST(DensePart, RefusesEmbeddingTablesAndScalars) {
  VariableDef table;
  table.set_name("emb");
  table.set_sparse(true);
  table.mutable_shape()->add_dims(10);
  table.mutable_shape()->add_dims(4);
  absl::StatusOr<DensePart> part = CheckPart(Part("emb", 0, 0, 5), table);
  EXPECT_EQ(part.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(part.status().message().find("'emb'"), std::string::npos);
  VariableDef scalar;
  scalar.set_name("s");
  EXPECT_EQ(CheckPart(Part("s", 0, 0, 1), scalar).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(DensePart, MapsAPartOntoAPiece) {
  VariableDef def;
  def.set_name("k");
  def.mutable_shape()->add_dims(4);
  def.mutable_shape()->add_dims(4);
  // Columns [1, 3) on a piece of rows [2, 4): element k of the part's rows
  // lies at row k / 2, column 1 + k % 2 of the piece.
  const DensePart columns{1, 1, 3};
  const PartRows rows = PartRowsOnPiece(columns, def, 2, 4);
  EXPECT_EQ(rows.begin, 2);
  EXPECT_EQ(rows.end, 4);
  EXPECT_EQ(rows.elements, 4);
  EXPECT_EQ(PieceIndex(columns, def, 2, rows, 3), 1 * 4 + 2);
  // Rows [1, 3) on a piece of rows [2, 4): the part's row 1, the piece's 0.
  const DensePart part_rows{0, 1, 3};
  const PartRows on = PartRowsOnPiece(part_rows, def, 2, 4);
  EXPECT_EQ(on.begin, 1);
  EXPECT_EQ(on.end, 2);
  EXPECT_EQ(PieceIndex(part_rows, def, 2, on, 5), 5);
  EXPECT_EQ(HeldShape(def, {{"k", columns}}), (std::vector<int64_t>{4, 2}));
  EXPECT_EQ(HeldShape(def, {}), (std::vector<int64_t>{4, 4}));
}

TEST(DensePart, MapsAPartOfAMiddleDimensionOntoAPiece) {
  // An attention kernel [d_model 2, heads 3, key_dim 2] split by heads:
  // heads [1, 3) are elements 2..5 of each row of 6.
  VariableDef def;
  def.set_name("query/kernel");
  for (int d : {2, 3, 2}) def.mutable_shape()->add_dims(d);
  const DensePart heads{1, 1, 3};
  const PartRows rows = PartRowsOnPiece(heads, def, 0, 2);
  EXPECT_EQ(rows.elements, 8);
  EXPECT_EQ(PieceIndex(heads, def, 0, rows, 0), 2);
  EXPECT_EQ(PieceIndex(heads, def, 0, rows, 5), 6 + 2 + 1);
  std::vector<float> piece(12), out(8);
  for (int i = 0; i < 12; ++i) piece[i] = i;
  CopyPartOut(heads, def, 0, rows, piece.data(), out.data());
  EXPECT_EQ(out, (std::vector<float>{2, 3, 4, 5, 8, 9, 10, 11}));
  EXPECT_EQ(HeldShape(def, {{"query/kernel", heads}}),
            (std::vector<int64_t>{2, 2, 2}));
}

}  // namespace
}  // namespace ps
}  // namespace pstrain
