#include "chief/embedding_settings.h"

#include <map>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "common/status_macros.h"
#include "ps/optimizer.h"

namespace pstrain {
namespace chief {
namespace {

constexpr const char* kKinds[] = {"sgd",  "momentum", "adagrad",
                                  "adam", "ftrl",     "lazy_adam"};

// The flag that sets OptimizerConfig field `field` ("ftrl.beta") of the
// embedding optimizer.
std::string FlagOf(absl::string_view field) {
  static const auto* flags = new std::map<std::string, std::string>{
      {"learning_rate", "embedding_learning_rate"},
      {"weight_decay", "weight_decay"},
      {"momentum", "momentum"},
      {"initial_accumulator_value", "embedding_initial_accumulator_value"},
      {"epsilon", "embedding_epsilon"},
      {"beta_1", "embedding_beta_1"},
      {"beta_2", "embedding_beta_2"},
      {"learning_rate_power", "ftrl_learning_rate_power"},
      {"l1_regularization_strength", "ftrl_l1_regularization_strength"},
      {"l2_regularization_strength", "ftrl_l2_regularization_strength"},
      {"l2_shrinkage_regularization_strength",
       "ftrl_l2_shrinkage_regularization_strength"},
      {"beta", "ftrl_beta"},
  };
  const std::string last(field.substr(field.rfind('.') + 1));
  auto it = flags->find(last);
  return absl::StrCat("--", it == flags->end() ? last : it->second);
}

// The config of optimizer `kind` from the settings, checked.
absl::StatusOr<OptimizerConfig> Build(const EmbeddingSettings& s,
                                      const std::string& kind,
                                      double dense_learning_rate) {
  OptimizerConfig config;
  const float eps = static_cast<float>(s.epsilon);
  if (kind == "sgd") {
    config.mutable_sgd();
  } else if (kind == "momentum") {
    config.mutable_momentum()->set_momentum(static_cast<float>(s.momentum));
    config.mutable_momentum()->set_nesterov(s.nesterov);
  } else if (kind == "adagrad") {
    OptimizerConfig::Adagrad* adagrad = config.mutable_adagrad();
    adagrad->set_initial_accumulator_value(
        static_cast<float>(s.initial_accumulator_value));
    adagrad->set_epsilon(eps);
    adagrad->set_epsilon_outside_sqrt(true);  // TensorFlow's
  } else if (kind == "adam") {
    config.mutable_adam()->set_beta_1(static_cast<float>(s.beta_1));
    config.mutable_adam()->set_beta_2(static_cast<float>(s.beta_2));
    config.mutable_adam()->set_epsilon(eps);
  } else if (kind == "lazy_adam") {
    config.mutable_lazy_adam()->set_beta_1(static_cast<float>(s.beta_1));
    config.mutable_lazy_adam()->set_beta_2(static_cast<float>(s.beta_2));
    config.mutable_lazy_adam()->set_epsilon(eps);
  } else if (kind == "ftrl") {
    OptimizerConfig::Ftrl* ftrl = config.mutable_ftrl();
    ftrl->set_learning_rate_power(
        static_cast<float>(s.ftrl_learning_rate_power));
    ftrl->set_initial_accumulator_value(
        static_cast<float>(s.initial_accumulator_value));
    ftrl->set_l1_regularization_strength(static_cast<float>(s.ftrl_l1));
    ftrl->set_l2_regularization_strength(static_cast<float>(s.ftrl_l2));
    ftrl->set_l2_shrinkage_regularization_strength(
        static_cast<float>(s.ftrl_l2_shrinkage));
    ftrl->set_beta(static_cast<float>(s.ftrl_beta));
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("--embedding_optimizer: \"", kind, "\" is not ",
                     absl::StrJoin(kKinds, ", "), " (or empty: --optimizer)"));
  }
  config.set_learning_rate(s.learning_rate != 0 ? s.learning_rate
                                                : dense_learning_rate);
  PSTRAIN_RETURN_IF_ERROR(ps::CheckOptimizerConfig(config, FlagOf));
  return config;
}

bool Growing(const VariableDef& def) {
  return def.sparse() && def.shape().dims_size() >= 2 &&
         def.shape().dims(0) == 0;
}

}  // namespace

absl::Status CheckEmbeddingSettings(const EmbeddingSettings& settings) {
  if (settings.min_count < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--embedding_min_count: ", settings.min_count, " must be >= 1"));
  }
  if (settings.ttl_steps < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--embedding_ttl_steps: ", settings.ttl_steps, " must be >= 0"));
  }
  if (settings.max_rows < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--embedding_max_rows: ", settings.max_rows, " must be >= 0"));
  }
  if (settings.optimizer.empty() && settings.learning_rate != 0) {
    return absl::InvalidArgumentError(
        "--embedding_learning_rate: applies with --embedding_optimizer only");
  }
  // Every kind, with a valid stand-in rate when the flag is 0: a bad value
  // is refused whichever optimizer the run picks.
  for (const char* kind : kKinds) {
    PSTRAIN_RETURN_IF_ERROR(Build(settings, kind, 0.01).status());
  }
  if (!settings.optimizer.empty()) {
    PSTRAIN_RETURN_IF_ERROR(
        Build(settings, settings.optimizer, 0.01).status());
  }
  return absl::OkStatus();
}

absl::StatusOr<std::optional<OptimizerConfig>> EmbeddingOptimizer(
    const EmbeddingSettings& settings, const OptimizerConfig& dense) {
  PSTRAIN_RETURN_IF_ERROR(CheckEmbeddingSettings(settings));
  if (settings.optimizer.empty()) return std::nullopt;
  return Build(settings, settings.optimizer, dense.learning_rate());
}

absl::Status ApplyEmbeddingSettings(const EmbeddingSettings& settings,
                                    const OptimizerConfig& dense,
                                    std::vector<VariableDef>* variables) {
  PSTRAIN_ASSIGN_OR_RETURN(std::optional<OptimizerConfig> optimizer,
                           EmbeddingOptimizer(settings, dense));
  const bool lifecycle = settings.min_count > 1 || settings.ttl_steps > 0 ||
                         settings.max_rows > 0;
  for (VariableDef& def : *variables) {
    if (!def.sparse()) continue;
    if (optimizer.has_value()) *def.mutable_optimizer() = *optimizer;
    if (lifecycle && Growing(def)) {
      VariableDef::Lifecycle* l = def.mutable_lifecycle();
      l->set_min_count(settings.min_count);
      l->set_ttl_steps(settings.ttl_steps);
      l->set_max_rows(settings.max_rows);
    }
  }
  return absl::OkStatus();
}

std::string DescribeEmbeddings(const std::vector<VariableDef>& variables,
                               const OptimizerConfig& dense) {
  std::vector<std::string> tables;
  for (const VariableDef& def : variables) {
    if (!def.sparse()) continue;
    const OptimizerConfig& config =
        def.has_optimizer() ? def.optimizer() : dense;
    absl::StatusOr<std::unique_ptr<ps::Optimizer>> optimizer =
        ps::CreateOptimizer(config);
    int64_t width = 1;
    for (int d = 1; d < def.shape().dims_size(); ++d) {
      width *= def.shape().dims(d);
    }
    const int slots = optimizer.ok() ? (*optimizer)->NumSlots() : 0;
    // As EmbeddingTable::bytes_per_row: value and slots, and for a growing
    // table its id, update count, last-update version and hash-map entry.
    int64_t row_bytes = width * (1 + slots) * 4;
    if (Growing(def)) row_bytes += 8 + 16 + 17;
    std::string kind = def.has_optimizer() ? "" : "the dense optimizer, ";
    if (def.has_optimizer()) {
      const std::string name(
          OptimizerConfig::descriptor()
              ->FindFieldByNumber(config.kind_case())
              ->name());
      kind = absl::StrCat(name, " lr ", config.learning_rate(), ", ");
    }
    std::string lifecycle;
    if (def.has_lifecycle()) {
      lifecycle = absl::StrCat("min_count ", def.lifecycle().min_count(),
                               ", ttl_steps ", def.lifecycle().ttl_steps(),
                               ", max_rows ", def.lifecycle().max_rows(), "; ");
    }
    tables.push_back(absl::StrCat(
        def.name(), " (", Growing(def) ? "growing" : "fixed", ", ", width,
        " wide, ", kind, lifecycle, row_bytes, " bytes per row on a ps)"));
  }
  if (tables.empty()) return "";
  return absl::StrCat("embedding tables: ", absl::StrJoin(tables, "; "));
}

}  // namespace chief
}  // namespace pstrain
