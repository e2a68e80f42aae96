#include "compute/cpu/engine.h"

#include <omp.h>

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "compute/cpu/dnnl_util.h"

namespace pstrain {
namespace worker {
namespace cpu {

absl::StatusOr<std::unique_ptr<Engine>> Engine::Create(
    const EngineOptions& options) {
  if (options.num_threads < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Engine: num_threads must be >= 0, got ", options.num_threads));
  }
  int num_threads =
      options.num_threads > 0 ? options.num_threads : omp_get_max_threads();
  std::unique_ptr<Engine> result;
  absl::Status status = Guard("Engine: create", [&]() -> absl::Status {
    dnnl::engine engine(dnnl::engine::kind::cpu, 0);
    dnnl::stream stream(engine);
    result.reset(new Engine(std::move(engine), std::move(stream), num_threads,
                            options.bf16));
    return absl::OkStatus();
  });
  if (!status.ok()) return status;
  return result;
}

void Engine::UseThreads() const {
  // omp_get_max_threads reads a thread-local value: cheap next to any
  // primitive.
  if (omp_get_max_threads() != num_threads_) omp_set_num_threads(num_threads_);
}

absl::Status Engine::Execute(
    absl::string_view op, const dnnl::primitive& primitive,
    const std::unordered_map<int, dnnl::memory>& args) {
  UseThreads();
  return Guard(op, [&]() -> absl::Status {
    primitive.execute(stream_, args);
    stream_.wait();
    return absl::OkStatus();
  });
}

}  // namespace cpu
}  // namespace worker
}  // namespace pstrain
