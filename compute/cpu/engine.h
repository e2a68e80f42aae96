// The oneDNN CPU engine and stream every CPU op runs on, and the number of
// threads its primitives use.
//
//   EngineOptions options;
//   options.num_threads = 2;
//   absl::StatusOr<std::unique_ptr<Engine>> engine = Engine::Create(options);
//   absl::StatusOr<std::unique_ptr<Conv2DOp>> conv =
//       Conv2DOp::Create(shape, engine->get());
//
// Debian's libdnnl (2.6) is built with the OpenMP CPU runtime (GNU libgomp):
// its primitives run on the OpenMP thread team of the thread that executes
// them, sized by that thread's omp_get_max_threads(). oneDNN also reads that
// number when a primitive is created, to partition its work. In libgomp the
// thread count is a per-thread setting, so the Engine applies `num_threads`
// to the calling thread (omp_set_num_threads) whenever an op is created or
// executed through it; no process-wide or environment setting is involved
// below main.
//
// Ops keep a pointer to the Engine they were created on: it must outlive
// them. Not thread-safe: an Engine and its ops belong to one thread at a time
// (one Engine per worker compute thread).
#ifndef PSTRAIN_COMPUTE_CPU_ENGINE_H_
#define PSTRAIN_COMPUTE_CPU_ENGINE_H_

#include <memory>
#include <unordered_map>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "oneapi/dnnl/dnnl.hpp"

namespace pstrain {
namespace worker {
namespace cpu {

struct EngineOptions {
  // OpenMP threads for oneDNN primitives; 0 keeps the OpenMP default
  // (OMP_NUM_THREADS, else one per core).
  int num_threads = 0;
  // bf16 mixed precision for the Conv2D and Dense stages made on this engine
  // (graph_stage.h sets their shapes' bf16 from it; compute/precision.h).
  bool bf16 = false;
};

class Engine {
 public:
  // INVALID_ARGUMENT for a negative thread count; INTERNAL if oneDNN cannot
  // create a CPU engine.
  static absl::StatusOr<std::unique_ptr<Engine>> Create(
      const EngineOptions& options);

  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // The threads primitives run on: the configured count, or the OpenMP
  // default when none was configured.
  int num_threads() const { return num_threads_; }

  // EngineOptions::bf16.
  bool bf16() const { return bf16_; }

  // Sets the calling thread's OpenMP thread count to num_threads(). Ops call
  // this before creating primitives; Execute calls it before running one.
  void UseThreads() const;

  // Runs `primitive` with `args` on the stream and waits for it. Errors
  // become a status naming `op`.
  absl::Status Execute(absl::string_view op, const dnnl::primitive& primitive,
                       const std::unordered_map<int, dnnl::memory>& args);

  const dnnl::engine& dnnl_engine() const { return engine_; }

 private:
  Engine(dnnl::engine engine, dnnl::stream stream, int num_threads, bool bf16)
      : engine_(std::move(engine)),
        stream_(std::move(stream)),
        num_threads_(num_threads),
        bf16_(bf16) {}

  dnnl::engine engine_;
  dnnl::stream stream_;
  int num_threads_;
  bool bf16_;
};

}  // namespace cpu
}  // namespace worker
}  // namespace pstrain

#endif  // PSTRAIN_COMPUTE_CPU_ENGINE_H_
