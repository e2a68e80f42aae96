// The growing embedding table piece the table benchmarks (embedding_cap,
// embedding_step) exercise: one ps piece holding every bucket, rows of
// `width` floats initialized uniformly in [-0.05, 0.05], capped at
// `max_rows` (0: no cap), trained by Adagrad as the Criteo example's is.
#ifndef PSTRAIN_BENCH_GROWING_TABLE_H_
#define PSTRAIN_BENCH_GROWING_TABLE_H_

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "proto/training.pb.h"
#include "ps/embedding_table.h"
#include "ps/optimizer.h"

namespace pstrain {
namespace bench {

struct GrowingTable {
  std::unique_ptr<ps::Optimizer> optimizer;
  std::unique_ptr<ps::EmbeddingTable> table;
};

inline absl::StatusOr<GrowingTable> MakeGrowingTable(int64_t width,
                                                     int64_t max_rows) {
  OptimizerConfig adagrad;
  adagrad.set_learning_rate(0.05);
  adagrad.mutable_adagrad()->set_initial_accumulator_value(0.1f);
  adagrad.mutable_adagrad()->set_epsilon_outside_sqrt(true);
  GrowingTable made;
  absl::StatusOr<std::unique_ptr<ps::Optimizer>> optimizer =
      ps::CreateOptimizer(adagrad);
  if (!optimizer.ok()) return optimizer.status();
  made.optimizer = *std::move(optimizer);
  VariableDef def;
  def.set_name("emb");
  def.set_dtype(DT_FLOAT);
  def.set_sparse(true);
  def.mutable_shape()->add_dims(0);
  def.mutable_shape()->add_dims(width);
  def.mutable_initializer()->mutable_random_uniform()->set_minval(-0.05f);
  def.mutable_initializer()->mutable_random_uniform()->set_maxval(0.05f);
  if (max_rows > 0) def.mutable_lifecycle()->set_max_rows(max_rows);
  absl::StatusOr<std::unique_ptr<ps::EmbeddingTable>> table =
      ps::EmbeddingTable::CreateGrowing(def, 0, 1, made.optimizer.get());
  if (!table.ok()) return table.status();
  made.table = *std::move(table);
  return made;
}

}  // namespace bench
}  // namespace pstrain

#endif  // PSTRAIN_BENCH_GROWING_TABLE_H_
