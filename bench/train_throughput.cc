// Training throughput of one process: the shipped `cnn` trained on
// Fashion-MNIST with plain SGD (lr 0.01) applied in the process, no ps, no
// network. Its twin is bench/pytorch_cnn.py: run both side by side.
//
//   bazel run --config=opt //bench:train_throughput -- --threads 1
//   bazel run --config=opt //bench:train_throughput -- --device gpu
//   bazel run --config=opt //bench:train_throughput -- --precision bf16
//
// Times --steps steps of --batch images after 10 untimed warm-up steps and
// prints a final JSON line
//   {"framework":"pstrain","model":"cnn","device":"cpu",
//    "compute":"CPU (oneDNN, 1 thread)","threads":1,
//    "batch":64,"steps":200,"images_per_sec":...,"final_loss":...,
//    "openmp_wait":"GOMP_SPINCOUNT=1000"}
#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/process.h"
#include "compute/cpu/openmp_wait_policy.h"
#include "compute/cpu/sgd_throughput.h"
#include "compute/precision.h"

ABSL_FLAG(int, threads, 1, "oneDNN threads");
ABSL_FLAG(int64_t, steps, 200, "Timed training steps");
ABSL_FLAG(int64_t, batch, 64, "Images per step");
ABSL_FLAG(std::string, device, "cpu",
          "cpu, gpu, gpu:N or auto, as the worker's --device");
ABSL_FLAG(std::string, precision, "fp32",
          "fp32 or bf16 (Conv2D and Dense in bf16, as the chief's "
          "--precision; CPU only)");
ABSL_FLAG(std::string, model, "cnn", "Shipped model name or Keras JSON path");
ABSL_FLAG(double, lr, 0.01, "SGD learning rate");
ABSL_FLAG(std::string, data_dir, "/usr/share/datasets/fashion-mnist",
          "Folder of train-{images-idx3,labels-idx1}-ubyte.gz");

namespace {

// The OpenMP wait settings this run has (libgomp read them at load).
std::string OpenMpWait() {
  std::string wait;
  for (const char* name : {"OMP_WAIT_POLICY", "GOMP_SPINCOUNT"}) {
    if (const char* value = std::getenv(name)) {
      absl::StrAppend(&wait, wait.empty() ? "" : " ", name, "=", value);
    }
  }
  return wait.empty() ? "libgomp default" : wait;
}

}  // namespace

int main(int argc, char** argv) {
  // As the worker: OpenMP threads that soon sleep (may re-execute; see
  // compute/cpu/openmp_wait_policy.h). GOMP_SPINCOUNT or OMP_WAIT_POLICY in
  // the environment overrides it.
  const absl::Status openmp =
      pstrain::worker::cpu::ReexecWithOpenMpWaitPolicy(argv);
  if (!openmp.ok()) pstrain::LogError(openmp.ToString());
  absl::ParseCommandLine(argc, argv);
  pstrain::TuneMallocForLargeBuffers();
  pstrain::worker::cpu::SgdThroughputOptions options;
  options.model = absl::GetFlag(FLAGS_model);
  const std::string dir = absl::GetFlag(FLAGS_data_dir);
  options.images_path = dir + "/train-images-idx3-ubyte.gz";
  options.labels_path = dir + "/train-labels-idx1-ubyte.gz";
  options.threads = absl::GetFlag(FLAGS_threads);
  options.device = absl::GetFlag(FLAGS_device);
  absl::StatusOr<pstrain::worker::Precision> precision =
      pstrain::worker::ParsePrecision(absl::GetFlag(FLAGS_precision));
  if (!precision.ok()) {
    std::fprintf(stderr, "train_throughput: --precision: %s\n",
                 std::string(precision.status().message()).c_str());
    return 2;
  }
  options.precision = *precision;
  options.batch = absl::GetFlag(FLAGS_batch);
  options.steps = absl::GetFlag(FLAGS_steps);
  options.warmup_steps = 10;
  options.learning_rate = static_cast<float>(absl::GetFlag(FLAGS_lr));
  absl::StatusOr<pstrain::worker::cpu::SgdThroughputResult> result =
      pstrain::worker::cpu::RunSgdThroughput(options);
  if (!result.ok()) {
    std::fprintf(stderr, "train_throughput: %s\n",
                 result.status().ToString().c_str());
    return 1;
  }
  std::printf(
      "%s\n",
      absl::StrFormat(
          "{\"framework\":\"pstrain\",\"model\":\"%s\",\"device\":\"%s\","
          "\"compute\":\"%s\",\"precision\":\"%s\",\"threads\":%d,\"batch\":%d,"
          "\"steps\":%d,\"images_per_sec\":%.1f,"
          "\"final_loss\":%.4f,\"openmp_wait\":\"%s\"}",
          options.model, options.device, result->device,
          pstrain::worker::PrecisionName(options.precision), options.threads,
          options.batch, options.steps, result->images_per_sec,
          result->final_loss, OpenMpWait())
          .c_str());
  return 0;
}
