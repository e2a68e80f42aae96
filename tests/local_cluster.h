// A pstrain cluster as real processes on 127.0.0.1 for multi-process tests:
// a chief, ps tasks and workers started from their binaries with TF_CONFIG,
// on ports picked at run time.
//
//   LocalCluster cluster(/*num_ps=*/2, /*num_workers=*/2);
//   std::string log = cluster.Run("sync", {"--model=mlp", "--steps=60"});
#ifndef PSTRAIN_TESTS_LOCAL_CLUSTER_H_
#define PSTRAIN_TESTS_LOCAL_CLUSTER_H_

#include <map>
#include <string>
#include <vector>

#include "tests/subprocess.h"

namespace pstrain {
namespace testing {

// Where Debian's dataset-fashion-mnist puts the data, and whether it is there
// (tests that train skip, saying why, when it is not).
inline constexpr char kFashionMnistDir[] = "/usr/share/datasets/fashion-mnist";
bool HaveFashionMnist();

// The content of `p`'s log.
std::string Log(Subprocess& p);

class LocalCluster {
 public:
  // num_ps 0: a collective run (TF_CONFIG without a "ps" job).
  LocalCluster(int num_ps, int num_workers);

  int num_ps() const { return ps_.size(); }
  int num_workers() const { return workers_.size(); }

  // Lists one more worker (a cluster that differs from this one).
  void AddWorker();
  // Lists an evaluator task (started from the chief binary).
  void AddEvaluator();

  // The TF_CONFIG of task `type`:`index` of this cluster.
  std::string TfConfig(const std::string& type, int index) const;

  // Starts task `type`:`index` ("chief", "ps", "worker" or "evaluator")
  // with `args`; its log is "<name>-<type><index>.log" in the test's
  // scratch directory. A chief, ps or evaluator not given --model_dir gets
  // "<name>-model" there: the tasks of one `name` share it.
  Subprocess Start(const std::string& name, const std::string& type, int index,
                   const std::vector<std::string>& args = {}) const;

  // Runs a whole run: every ps (with the chief's --model_dir) and worker
  // (with `worker_flags`; in a collective run, one without ps tasks, with the
  // chief's --model_dir too), then the chief with `chief_flags`; expects
  // every process to exit 0 and returns the chief's log. The chief gets
  // up to 600 s, less near the end of Bazel's timeout of the test.
  std::string Run(const std::string& name,
                  const std::vector<std::string>& chief_flags,
                  const std::vector<std::string>& worker_flags = {}) const;

 private:
  std::string chief_;
  std::vector<std::string> ps_, workers_;
  std::string evaluator_;  // "" when none
};

// `chief --export_safetensors` of `model_dir`'s newest good checkpoint into
// "<name>.safetensors" in the scratch directory; returns its path.
std::string ExportSafetensors(const std::string& model_dir,
                              const std::string& name);

// The float32 tensors of a safetensors file, by name (empty if it is not
// one).
std::map<std::string, std::vector<float>> ReadSafetensors(
    const std::string& path);

// The largest difference between equally named tensors of `a` and `b`; a
// name of `a` missing from `b`, or of another size there, fails the test
// and gives infinity.
double LargestDifference(const std::map<std::string, std::vector<float>>& a,
                         const std::map<std::string, std::vector<float>>& b);

}  // namespace testing
}  // namespace pstrain

#endif  // PSTRAIN_TESTS_LOCAL_CLUSTER_H_
