// Fuzzes the --layout_map parser and its resolution against a model's
// variables (parallel/layout_map.h). Input: a byte (the group's model size,
// 1 + byte % 4), then the map's JSON text. The variables are a small
// model's: d1/kernel [8, 6], d1/bias [6], emb/embeddings [10, 4], ln/gamma
// [6], s/scalar []. Checks what the header promises:
//   - Parse and Resolve refuse with INVALID_ARGUMENT starting "layout_map: ";
//   - Resolve gives every variable with its shape, split on a dimension of
//     its rank that the model size divides, or replicated;
//   - a variable is split only where its first matching key (MatchingKey)
//     says so: one no key matches is replicated.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "parallel/layout_map.h"
#include "tests/fuzz/fuzz_util.h"

namespace pstrain {
namespace parallel {
namespace {

VariableDef Variable(const std::string& name, std::vector<int64_t> dims) {
  VariableDef def;
  def.set_name(name);
  def.set_dtype(DT_FLOAT);
  for (int64_t d : dims) def.mutable_shape()->add_dims(d);
  return def;
}

void CheckError(const absl::Status& status, absl::string_view call) {
  PSTRAIN_FUZZ_EXPECT(absl::IsInvalidArgument(status), call, ": ",
                      status.ToString());
  PSTRAIN_FUZZ_EXPECT(absl::StartsWith(status.message(), "layout_map: "), call,
                      ": ", status.message());
}

void FuzzOne(const uint8_t* data, size_t size) {
  fuzz::FuzzReader in(data, size);
  const int model_size = 1 + in.Byte() % 4;
  const absl::string_view json = in.Rest();
  const absl::StatusOr<LayoutMap> map = LayoutMap::Parse(json);
  if (!map.ok()) {
    CheckError(map.status(), "Parse");
    return;
  }
  const std::vector<VariableDef> variables = {
      Variable("d1/kernel", {8, 6}), Variable("d1/bias", {6}),
      Variable("emb/embeddings", {10, 4}), Variable("ln/gamma", {6}),
      Variable("s/scalar", {})};
  const absl::StatusOr<VariableSplits> splits =
      map->Resolve(variables, model_size);
  if (!splits.ok()) {
    CheckError(splits.status(), "Resolve");
    return;
  }
  PSTRAIN_FUZZ_EXPECT(splits->size() == variables.size(), splits->size(),
                      " splits for ", variables.size(), " variables");
  for (const VariableDef& def : variables) {
    auto it = splits->find(def.name());
    PSTRAIN_FUZZ_EXPECT(it != splits->end(), def.name(), " not resolved");
    const VariableSplit& split = it->second;
    const int rank = def.shape().dims_size();
    PSTRAIN_FUZZ_EXPECT(static_cast<int>(split.shape.size()) == rank,
                        def.name(), ": rank ", split.shape.size());
    for (int d = 0; d < rank; ++d) {
      PSTRAIN_FUZZ_EXPECT(split.shape[d] == def.shape().dims(d), def.name(),
                          ": dimension ", d, " is ", split.shape[d]);
    }
    PSTRAIN_FUZZ_EXPECT(split.split_dim >= -1 && split.split_dim < rank,
                        def.name(), ": split dimension ", split.split_dim);
    if (split.split()) {
      PSTRAIN_FUZZ_EXPECT(split.shape[split.split_dim] % model_size == 0,
                          def.name(), ": dimension ", split.split_dim,
                          " split ", model_size, " ways");
    }
    const std::optional<std::string> key = map->MatchingKey(def.name());
    PSTRAIN_FUZZ_EXPECT(key.has_value() || !split.split(), def.name(),
                        " split though no key matches it");
  }
}

}  // namespace
}  // namespace parallel
}  // namespace pstrain

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  pstrain::parallel::FuzzOne(data, size);
  return 0;
}
