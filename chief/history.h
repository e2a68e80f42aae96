// The per-epoch record of a run, as Keras's History callback keeps it and its
// CSVLogger writes it: for each epoch (from 0, as Keras counts) named values
// such as "loss", "accuracy" (training, over the epoch), "val_loss",
// "val_accuracy" (evaluation at the epoch's end), "examples_per_sec",
// "seconds". The chief writes it as model_dir/history.csv and as the
// "history" of summary.json (chief/run_log.h).
//
//   History history;
//   history.Set(0, "loss", 0.61);
//   history.Set(0, "val_loss", 0.48);
//   WriteFileAtomically(dir + "/history.csv", history.ToCsv());
//
// Values are written in the shortest form that reads back as the same
// double, so a reader gets exactly what was set. Not thread-safe.
#ifndef PSTRAIN_CHIEF_HISTORY_H_
#define PSTRAIN_CHIEF_HISTORY_H_

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace pstrain {
namespace chief {

class History {
 public:
  // The history ToCsv wrote (a restarted chief's history.csv), keeping the
  // epochs before `before`. Errors say which line is wrong and why.
  static absl::StatusOr<History> FromCsv(absl::string_view csv, int64_t before);

  // Sets value `name` of epoch `epoch`, replacing an earlier one (an epoch
  // trained again after a recovery ends again).
  void Set(int64_t epoch, const std::string& name, double value);

  // Value `name` of `epoch`, if set.
  std::optional<double> Get(int64_t epoch, const std::string& name) const;

  bool empty() const { return epochs_.empty(); }

  // CSVLogger's layout: a header "epoch," then every name set, sorted, then
  // a row per epoch in order; "NA" where an epoch lacks a value (an
  // evaluation still to come), "nan"/"inf"/"-inf" for non-finite values, as
  // Python writes them.
  std::string ToCsv() const;

  // Keras's History.history with its epochs, as a JSON object:
  // {"epoch": [0, 1], "accuracy": [0.81, 0.86], ...}, names sorted; null
  // where an epoch lacks a value or it is not finite (JSON has no NaN).
  std::string ToJson() const;

 private:
  std::map<int64_t, std::map<std::string, double>> epochs_;
  std::set<std::string> names_;
};

}  // namespace chief
}  // namespace pstrain

#endif  // PSTRAIN_CHIEF_HISTORY_H_
