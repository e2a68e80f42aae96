#include "common/placement.h"

#include <algorithm>
#include <memory>
#include <numeric>
#include <tuple>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/pattern.h"
#include "common/status_macros.h"
#include "common/tensor.h"

namespace pstrain {
namespace {

using Slice = VariablePlacement::Slice;

constexpr int64_t kMaxTotalBytes = int64_t{1} << 62;

absl::Status VariableError(absl::string_view name, absl::string_view problem) {
  return absl::InvalidArgumentError(
      absl::StrCat("placement: variable '", name, "': ", problem));
}

absl::Status RuleError(absl::string_view pattern, absl::string_view problem) {
  return absl::InvalidArgumentError(
      absl::StrCat("placement: rule '", pattern, "': ", problem));
}

struct CompiledRule {
  const PlacementRule* rule;
  std::shared_ptr<const re2::RE2> regex;
};

absl::StatusOr<std::vector<CompiledRule>> CompileRules(
    const std::vector<PlacementRule>& rules) {
  std::vector<CompiledRule> compiled;
  for (const PlacementRule& rule : rules) {
    if (rule.num_shards < 0) {
      return RuleError(
          rule.pattern,
          absl::StrCat("num_shards ", rule.num_shards, " is negative"));
    }
    absl::StatusOr<std::shared_ptr<const re2::RE2>> regex =
        CompilePattern(rule.pattern);
    if (!regex.ok()) return RuleError(rule.pattern, regex.status().message());
    compiled.push_back({&rule, *std::move(regex)});
  }
  return compiled;
}

// The num_shards of the rule `name` selects (Keras's LayoutMap lookup: an
// exact key first, then the first pattern found in the name); 0 if none does.
int RuleShards(const std::vector<CompiledRule>& rules,
               const std::string& name) {
  for (const CompiledRule& c : rules) {
    if (c.rule->pattern == name) return c.rule->num_shards;
  }
  for (const CompiledRule& c : rules) {
    if (re2::RE2::PartialMatch(name, *c.regex)) return c.rule->num_shards;
  }
  return 0;
}

// A variable as the assignment sees it.
struct Piece {
  std::string name;
  int64_t rows = 0;       // 1 for a scalar.
  int64_t row_bytes = 0;  // Bytes of one row.
  int64_t bytes = 0;      // 0 for a growing embedding table.
  VariablePlacement::Partitioning partitioning = VariablePlacement::WHOLE;
  int num_slices = 1;
};

absl::StatusOr<Piece> Analyse(const VariableDef& v,
                              const std::vector<CompiledRule>& rules,
                              const PlacementOptions& options) {
  Piece piece;
  piece.name = v.name();
  const size_t element_size = DataTypeSize(v.dtype());
  if (element_size == 0) {
    return VariableError(v.name(), absl::StrCat("invalid dtype ", v.dtype()));
  }
  const std::vector<int64_t> dims(v.shape().dims().begin(),
                                  v.shape().dims().end());
  absl::StatusOr<int64_t> elements = NumElements(dims, element_size);
  if (!elements.ok()) {
    return VariableError(v.name(), elements.status().message());
  }
  if (v.sparse() && dims.empty()) {
    return VariableError(v.name(), "a sparse variable needs rank >= 1");
  }
  piece.bytes = *elements * static_cast<int64_t>(element_size);
  piece.rows = dims.empty() ? 1 : dims[0];
  piece.row_bytes = piece.rows > 0 ? piece.bytes / piece.rows : 0;
  const int shards = RuleShards(rules, v.name());

  if (v.sparse() && piece.rows == 0) {  // Grows on first touch.
    piece.partitioning = VariablePlacement::ROW_HASH;
    piece.num_slices =
        std::min(shards > 0 ? shards : options.num_ps, options.num_ps);
    return piece;
  }
  int64_t k = shards;
  if (k == 0) {
    k = piece.bytes > options.split_threshold_bytes ? options.num_ps : 1;
  }
  k = std::min({k, int64_t{options.num_ps}, piece.rows});
  if (k > 1) {
    piece.partitioning = VariablePlacement::ROW_RANGES;
    piece.num_slices = static_cast<int>(k);
  }
  return piece;
}

// The `k` least-loaded ps tasks, least-loaded first (ties: lowest index).
std::vector<int> LeastLoaded(const std::vector<int64_t>& loads, int k) {
  std::vector<int> tasks(loads.size());
  std::iota(tasks.begin(), tasks.end(), 0);
  std::partial_sort(tasks.begin(), tasks.begin() + k, tasks.end(),
                    [&loads](int a, int b) {
                      return std::tie(loads[a], a) < std::tie(loads[b], b);
                    });
  tasks.resize(k);
  return tasks;
}

}  // namespace

absl::StatusOr<Placement> ComputePlacement(
    absl::Span<const VariableDef> variables, const PlacementOptions& options) {
  if (options.num_ps < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "placement: num_ps ", options.num_ps, " must be at least 1"));
  }
  if (options.split_threshold_bytes < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("placement: split_threshold_bytes ",
                     options.split_threshold_bytes, " is negative"));
  }
  PSTRAIN_ASSIGN_OR_RETURN(std::vector<CompiledRule> rules,
                           CompileRules(options.rules));

  std::vector<Piece> pieces;
  for (size_t i = 0; i < variables.size(); ++i) {
    if (variables[i].name().empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("placement: variable ", i, " has an empty name"));
    }
    PSTRAIN_ASSIGN_OR_RETURN(Piece piece,
                             Analyse(variables[i], rules, options));
    pieces.push_back(std::move(piece));
  }
  // From here on nothing depends on the input order.
  std::sort(pieces.begin(), pieces.end(),
            [](const Piece& a, const Piece& b) { return a.name < b.name; });
  int64_t total_bytes = 0;
  for (size_t i = 0; i < pieces.size(); ++i) {
    if (i > 0 && pieces[i].name == pieces[i - 1].name) {
      return VariableError(pieces[i].name, "duplicate name");
    }
    if (pieces[i].bytes > kMaxTotalBytes - total_bytes) {
      return VariableError(pieces[i].name,
                           "all variables together exceed 2^62 bytes");
    }
    total_bytes += pieces[i].bytes;
  }

  Placement placement;
  placement.set_num_ps(options.num_ps);
  for (const Piece& piece : pieces) {
    VariablePlacement* v = placement.add_variables();
    v->set_name(piece.name);
    v->set_partitioning(piece.partitioning);
    // Rows as evenly as possible, the longer ranges first.
    const int64_t base = piece.rows / piece.num_slices;
    const int64_t extra = piece.rows % piece.num_slices;
    int64_t row = 0;
    for (int i = 0; i < piece.num_slices; ++i) {
      Slice* slice = v->add_slices();
      if (piece.partitioning == VariablePlacement::ROW_HASH) {
        slice->set_ps_task(i);
        continue;
      }
      slice->set_row_begin(row);
      row += base + (i < extra ? 1 : 0);
      slice->set_row_end(row);
    }
  }

  // Split variables first, then whole ones, each largest first; the stable
  // sort keeps name order among equals.
  std::vector<size_t> order(pieces.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&pieces](size_t a, size_t b) {
    const bool a_whole =
        pieces[a].partitioning != VariablePlacement::ROW_RANGES;
    const bool b_whole =
        pieces[b].partitioning != VariablePlacement::ROW_RANGES;
    return std::make_tuple(a_whole, -pieces[a].bytes) <
           std::make_tuple(b_whole, -pieces[b].bytes);
  });
  std::vector<int64_t> loads(options.num_ps, 0);
  for (size_t index : order) {
    const Piece& piece = pieces[index];
    if (piece.partitioning == VariablePlacement::ROW_HASH) continue;
    VariablePlacement* v = placement.mutable_variables(index);
    // Slices are longest first, so the larger go onto the less loaded tasks.
    const std::vector<int> tasks = LeastLoaded(loads, piece.num_slices);
    for (int i = 0; i < piece.num_slices; ++i) {
      Slice* slice = v->mutable_slices(i);
      slice->set_ps_task(tasks[i]);
      loads[tasks[i]] +=
          (slice->row_end() - slice->row_begin()) * piece.row_bytes;
    }
  }
  return placement;
}

absl::StatusOr<int> SliceForRow(const VariablePlacement& placement,
                                int64_t row) {
  const auto& slices = placement.slices();
  if (slices.empty()) {
    return VariableError(placement.name(), "placement has no slices");
  }
  if (row < 0) {
    return absl::OutOfRangeError(absl::StrCat("placement: variable '",
                                              placement.name(), "': row ", row,
                                              " is negative"));
  }
  switch (placement.partitioning()) {
    case VariablePlacement::ROW_HASH:
      return static_cast<int>(row % slices.size());
    case VariablePlacement::WHOLE:
    case VariablePlacement::ROW_RANGES: {
      // The first slice ending after `row`.
      auto it = std::upper_bound(
          slices.begin(), slices.end(), row,
          [](int64_t r, const Slice& s) { return r < s.row_end(); });
      if (it == slices.end() || it->row_begin() > row) {
        return absl::OutOfRangeError(absl::StrCat(
            "placement: variable '", placement.name(), "': row ", row,
            " is outside its rows [", slices.begin()->row_begin(), ", ",
            slices.rbegin()->row_end(), ")"));
      }
      return static_cast<int>(it - slices.begin());
    }
    default:
      return VariableError(
          placement.name(),
          absl::StrCat("unknown partitioning ", placement.partitioning()));
  }
}

}  // namespace pstrain
