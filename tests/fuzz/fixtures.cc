#include "tests/fuzz/fixtures.h"

#include <utility>
#include <vector>

namespace pstrain {
namespace fuzz {
namespace {

void AddVariable(CreateVariablesRequest* request, const std::string& name,
                 const std::vector<int64_t>& dims, bool sparse,
                 VariablePlacement::Partitioning partitioning,
                 const std::vector<std::pair<int64_t, int64_t>>& rows) {
  ShardVariable* v = request->add_variables();
  VariableDef* def = v->mutable_def();
  def->set_name(name);
  def->set_dtype(DT_FLOAT);
  for (int64_t d : dims) def->mutable_shape()->add_dims(d);
  def->set_sparse(sparse);
  def->mutable_initializer()->mutable_random_uniform()->set_minval(-1);
  def->mutable_initializer()->mutable_random_uniform()->set_maxval(1);
  def->mutable_initializer()->set_seed(7);
  VariablePlacement* placement = v->mutable_placement();
  placement->set_name(name);
  placement->set_partitioning(partitioning);
  for (size_t task = 0; task < rows.size(); ++task) {
    VariablePlacement::Slice* slice = placement->add_slices();
    slice->set_ps_task(static_cast<int32_t>(task));
    slice->set_row_begin(rows[task].first);
    slice->set_row_end(rows[task].second);
  }
}

}  // namespace

CreateVariablesRequest ShardFixture(uint8_t mode) {
  CreateVariablesRequest request;
  request.mutable_header()->set_run_id(kRunId);
  request.set_ps_task(0);
  OptimizerConfig* optimizer = request.mutable_optimizer();
  optimizer->set_learning_rate(0.1);
  switch ((mode >> 1) & 3) {
    case 0:
      optimizer->mutable_sgd();
      break;
    case 1:
      optimizer->mutable_momentum()->set_momentum(0.9f);
      break;
    case 2:
      optimizer->mutable_adagrad()->set_initial_accumulator_value(0.1f);
      optimizer->mutable_adagrad()->set_epsilon(1e-7f);
      break;
    default:
      optimizer->mutable_adam()->set_beta_1(0.9f);
      optimizer->mutable_adam()->set_beta_2(0.999f);
      optimizer->mutable_adam()->set_epsilon(1e-7f);
      break;
  }
  UpdateConfig* update = request.mutable_update();
  update->set_mode((mode & 1) ? UpdateConfig::SYNC : UpdateConfig::ASYNC);
  update->set_num_workers(2);
  update->set_max_staleness(3);
  update->set_step_timeout_ms(1);
  update->set_nan_policy(static_cast<NanPolicy>(((mode >> 3) & 3) % 3));
  AddVariable(&request, "dense/kernel", {4, 3}, false,
              VariablePlacement::ROW_RANGES, {{0, 2}, {2, 4}});
  AddVariable(&request, "dense/bias", {3}, false, VariablePlacement::WHOLE,
              {{0, 3}});
  AddVariable(&request, "scalar", {}, false, VariablePlacement::WHOLE,
              {{0, 1}});
  AddVariable(&request, "emb", {10, 2}, true, VariablePlacement::ROW_RANGES,
              {{0, 5}, {5, 10}});
  AddVariable(&request, "hashed", {0, 2}, true, VariablePlacement::ROW_HASH,
              {{0, 0}, {0, 0}});
  return request;
}

TrainingConfig ChiefFixtureConfig() {
  TrainingConfig config;
  config.set_model_name("mlp");
  config.mutable_optimizer()->mutable_sgd();
  config.mutable_optimizer()->set_learning_rate(0.1);
  config.mutable_update()->set_mode(UpdateConfig::SYNC);
  config.mutable_update()->set_num_workers(3);
  config.set_batch_size_per_worker(32);
  config.set_epochs(1);
  config.set_seed(1);
  return config;
}

}  // namespace fuzz
}  // namespace pstrain
