#include "parallel/layout_map.h"

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/json_util.h"
#include "common/pattern.h"
#include "common/read_file.h"
#include "model/dynamic_embeddings.h"
#include "nlohmann/json.hpp"
#include "parallel/mesh.h"

namespace pstrain {
namespace parallel {
namespace {

absl::Status KeyError(absl::string_view key, absl::string_view problem) {
  return absl::InvalidArgumentError(
      absl::StrCat("layout_map: key '", key, "': ", problem));
}

}  // namespace

absl::StatusOr<LayoutMap> LayoutMap::Parse(absl::string_view json) {
  // ordered_json keeps the keys in the file's order: the first match wins.
  const absl::StatusOr<nlohmann::ordered_json> parsed = ParseOrderedJson(json);
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("layout_map: ", parsed.status().message()));
  }
  const nlohmann::ordered_json& root = *parsed;
  if (!root.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat("layout_map: expected a JSON object from variable-path "
                     "patterns to layouts, got ",
                     root.dump()));
  }
  LayoutMap map;
  for (const auto& [key, layout] : root.items()) {
    Rule rule;
    rule.key = key;
    absl::StatusOr<std::shared_ptr<const re2::RE2>> regex = CompilePattern(key);
    if (!regex.ok()) return KeyError(key, regex.status().message());
    rule.regex = *std::move(regex);
    if (!layout.is_array()) {
      return KeyError(key, absl::StrCat("expected an array with one entry per "
                                        "dimension (null or \"model\"), got ",
                                        layout.dump()));
    }
    rule.rank = static_cast<int>(layout.size());
    for (int d = 0; d < rule.rank; ++d) {
      const nlohmann::ordered_json& axis = layout[d];
      if (axis.is_null()) continue;
      if (!axis.is_string()) {
        return KeyError(key, absl::StrCat("dimension ", d,
                                          ": expected null or an axis name, "
                                          "got ",
                                          axis.dump()));
      }
      const std::string name = axis.get<std::string>();
      if (name == kDataAxis) {
        return KeyError(key, absl::StrCat("dimension ", d,
                                          ": axis 'data' splits batches, not "
                                          "variables; only 'model' may split "
                                          "a variable"));
      }
      if (name != kModelAxis) {
        return KeyError(key,
                        absl::StrCat("dimension ", d, ": unknown axis '", name,
                                     "' (the mesh's axes are 'data' and "
                                     "'model')"));
      }
      if (rule.split_dim >= 0) {
        return KeyError(
            key, absl::StrCat("axis 'model' splits dimensions ", rule.split_dim,
                              " and ", d, "; a variable is split along one"));
      }
      rule.split_dim = d;
    }
    map.rules_.push_back(std::move(rule));
  }
  return map;
}

absl::StatusOr<std::string> ReadLayoutMapFile(const std::string& path) {
  absl::StatusOr<std::string> text = ReadFileAtMost(path, kMaxConfigFileBytes);
  if (!text.ok()) {
    return absl::Status(text.status().code(),
                        absl::StrCat("layout_map: --layout_map=", path, ": ",
                                     text.status().message()));
  }
  return text;
}

absl::StatusOr<LayoutMap> LayoutMap::Load(const std::string& path) {
  absl::StatusOr<std::string> text = ReadLayoutMapFile(path);
  if (!text.ok()) return text.status();
  absl::StatusOr<LayoutMap> map = Parse(*text);
  if (!map.ok()) {
    return absl::Status(map.status().code(),
                        absl::StrCat(path, ": ", map.status().message()));
  }
  return map;
}

const LayoutMap::Rule* LayoutMap::Match(const std::string& path) const {
  for (const Rule& rule : rules_) {
    if (re2::RE2::FullMatch(path, *rule.regex)) return &rule;
  }
  return nullptr;
}

std::optional<std::string> LayoutMap::MatchingKey(
    const std::string& path) const {
  const Rule* rule = Match(path);
  if (rule == nullptr) return std::nullopt;
  return rule->key;
}

absl::StatusOr<VariableSplits> LayoutMap::Resolve(
    const std::vector<VariableDef>& variables, int model_size) const {
  if (model_size <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("layout_map: the model axis has size ", model_size,
                     "; expected at least 1"));
  }
  VariableSplits splits;
  for (const VariableDef& def : variables) {
    VariableSplit split;
    split.shape.assign(def.shape().dims().begin(), def.shape().dims().end());
    const Rule* rule = Match(def.name());
    if (rule != nullptr) {
      const int rank = static_cast<int>(split.shape.size());
      if (rule->rank > rank) {
        return absl::InvalidArgumentError(
            absl::StrCat("layout_map: key '", rule->key, "' gives variable '",
                         def.name(), "' a layout of ", rule->rank,
                         " dimensions, but it has rank ", rank));
      }
      if (rule->split_dim >= 0) {
        if (worker::IsGrowingTable(def)) {
          return absl::InvalidArgumentError(absl::StrCat(
              "layout_map: key '", rule->key, "' splits variable '", def.name(),
              "', a growing embedding table (sparse), which cannot be split"));
        }
        const int64_t size = split.shape[rule->split_dim];
        if (size % model_size != 0) {
          return absl::InvalidArgumentError(absl::StrCat(
              "layout_map: key '", rule->key, "' splits dimension ",
              rule->split_dim, " of variable '", def.name(), "' (size ", size,
              ") over model:", model_size, ", which does not divide it"));
        }
        split.split_dim = rule->split_dim;
      }
    }
    splits.emplace(def.name(), std::move(split));
  }
  return splits;
}

}  // namespace parallel
}  // namespace pstrain
