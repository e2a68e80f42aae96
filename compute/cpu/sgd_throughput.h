// Single-process training throughput of a backend (the CPU's by default,
// or the one `device` names, compute/device_backend.h): a model trained on
// an IDX dataset (Fashion-MNIST) with plain SGD applied in place, no ps and
// no network, timed. This is the loop bench/train_throughput times against
// the same model in PyTorch (bench/pytorch_cnn.py); keep the two alike.
//
//   SgdThroughputOptions options;
//   options.images_path = ".../train-images-idx3-ubyte.gz";
//   options.labels_path = ".../train-labels-idx1-ubyte.gz";
//   options.threads = 2;
//   PSTRAIN_ASSIGN_OR_RETURN(SgdThroughputResult r, RunSgdThroughput(options));
//   std::cout << r.images_per_sec << "\n";
//
// The whole dataset is converted to float32 ([0, 1]) once, up front, and
// step k trains on the batch of images [k * batch, (k + 1) * batch) modulo
// the dataset, in file order. Each step is one Backend::TrainStep followed
// by w -= learning_rate * grad / batch on every variable, which is Keras's
// SGD on the mean loss plus the L2 penalties. Variables start from their
// Keras initializers (seeded by `seed`). The first warmup_steps steps (op
// creation, first touch of buffers) are excluded from the timing.
#ifndef PSTRAIN_COMPUTE_CPU_SGD_THROUGHPUT_H_
#define PSTRAIN_COMPUTE_CPU_SGD_THROUGHPUT_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "compute/precision.h"

namespace pstrain {
namespace worker {
namespace cpu {

struct SgdThroughputOptions {
  std::string model = "cnn";  // As LoadModel takes it.
  std::string images_path;    // IDX images and labels, raw or gzip.
  std::string labels_path;
  int threads = 1;            // oneDNN threads, >= 1.
  std::string device = "cpu";  // As --device: cpu, gpu, gpu:N, auto.
  Precision precision = Precision::kFp32;  // As the chief's --precision.
  int64_t batch = 64;         // >= 1.
  int64_t steps = 200;        // Timed steps, >= 1.
  int64_t warmup_steps = 10;  // Untimed steps before them, >= 0.
  float learning_rate = 0.01f;
  uint64_t seed = 42;
};

struct SgdThroughputResult {
  double seconds = 0;         // Wall time of the timed steps.
  double images_per_sec = 0;  // steps * batch / seconds.
  std::string device;         // Where it computed (DeviceBackend's words).
  // The last step's loss as Keras reports it: the batch's mean loss plus
  // the L2 penalties.
  double final_loss = 0;
};

// INVALID_ARGUMENT for options out of range or a model whose input is not
// one dataset image; the dataset's and the backend's errors as they are.
absl::StatusOr<SgdThroughputResult> RunSgdThroughput(
    const SgdThroughputOptions& options);

}  // namespace cpu
}  // namespace worker
}  // namespace pstrain

#endif  // PSTRAIN_COMPUTE_CPU_SGD_THROUGHPUT_H_
