// Everything a chief's run is made of, from its settings and the cluster:
// the TrainingConfig handed to every task (model, loss, optimizer, update
// rule, batch and run length), the parsed model, the placement of its
// variables on the ps tasks, and the training and test data. Every setting
// that cannot work is refused here, before the chief starts its server, with
// the flag (or TF_CONFIG) it came from.
//
//   RunSettings settings = ...;  // from flags, in main.cc
//   PSTRAIN_RETURN_IF_ERROR(CheckRunSettings(settings));
//   ... read TF_CONFIG ...
//   PSTRAIN_ASSIGN_OR_RETURN(RunSetup run, SetUpRun(settings, cluster));
#ifndef PSTRAIN_CHIEF_RUN_SETUP_H_
#define PSTRAIN_CHIEF_RUN_SETUP_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "chief/embedding_settings.h"
#include "chief/optimizer_settings.h"
#include "common/tf_config.h"
#include "common/update_config.h"
#include "data/dataset.h"
#include "data/run_length.h"
#include "model/model_spec.h"
#include "proto/training.pb.h"

namespace pstrain {
namespace chief {

// The chief's flags that shape the run, each named after its flag.
struct RunSettings {
  // cnn, mlp or the path of a Keras model's JSON.
  std::string model = "cnn";
  uint64_t seed = 42;
  OptimizerSettings optimizer;
  EmbeddingSettings embedding;
  // Comma-separated Embedding layers whose tables grow.
  std::string dynamic_embeddings;
  // "" (from the model's output layer) or a Keras loss name.
  std::string loss;
  bool from_logits = false;
  // parameter_server, multi_worker_mirrored or auto.
  std::string strategy = "auto";
  // float32 or bf16 (collective runs).
  std::string allreduce_dtype = "float32";
  // fp32 or bf16 (compute/precision.h).
  std::string precision = "fp32";
  // sync or async.
  std::string mode = "sync";
  int replicas_to_aggregate = 0;
  int max_staleness = -1;
  int step_timeout_seconds = absl::ToInt64Seconds(kDefaultStepTimeout);
  int batch_size = 64;
  int epochs = 1;
  int64_t steps = 0;
  std::string data_dir;
  // "" or criteo.
  std::string data_format;
  // refuse or skip.
  std::string bad_lines = "refuse";
  // criteo: glob patterns of the training and test files' names (empty:
  // data::DefaultCriteoPatterns).
  std::vector<std::string> train_files;
  std::vector<std::string> test_files;
  // wait or continue.
  std::string on_worker_failure = "wait";
  // Tensor model parallelism: "data:D,model:M" or "" (data-parallel), and
  // the path of a Keras-form layout map or "" (parallel/).
  std::string mesh;
  std::string layout_map;
};

// OK if every setting that can be checked without TF_CONFIG, the model or
// the data is in range (choices, ranges, the optimizers' hyper-parameters,
// settings that would do nothing in the chosen mode), else INVALID_ARGUMENT
// naming the flag and what it accepts.
absl::Status CheckRunSettings(const RunSettings& settings);

struct RunSetup {
  // True for a collective run (no ps tasks: the workers all-reduce).
  bool collective = false;
  TrainingConfig config;
  worker::ModelSpec spec;
  // Where each variable lives; a collective run's checkpoints are laid out
  // as one ps task's.
  Placement placement;
  // In memory; both empty with --data_format=criteo (streamed).
  data::Dataset train;
  data::Dataset test;
  // --data_format=criteo: the test files the chief evaluates on.
  std::vector<std::string> criteo_test_files;
  data::RunLength length;
};

// The run of `settings` on `cluster` (which must have at least one worker),
// after CheckRunSettings: the model and the data are read and checked
// against each other and the cluster. INVALID_ARGUMENT naming the flag or
// TF_CONFIG field at fault.
absl::StatusOr<RunSetup> SetUpRun(const RunSettings& settings,
                                  const ClusterSpec& cluster);

}  // namespace chief
}  // namespace pstrain

#endif  // PSTRAIN_CHIEF_RUN_SETUP_H_
