// Throughput of Tensor <-> TensorProto conversion, the copy every push and
// pull pays once. Run:
//   bazel run --config=opt //bench:tensor_proto_bench
// and compare with BM_MemcpyBaseline, a plain memcpy of the same bytes into a
// buffer that is reused. BM_FromProto allocates a new tensor per call (and,
// above glibc's mmap threshold, pays a page fault per 4 KB every time);
// BM_FromProtoInto reuses one.
#include <cstring>
#include <vector>

#include "benchmark/benchmark.h"
#include "common/tensor.h"

namespace pstrain {
namespace {

Tensor MakeTensor(int64_t bytes) {
  absl::StatusOr<Tensor> t = Tensor::Create(DT_FLOAT, {bytes / 4});
  if (!t.ok()) std::abort();
  for (float& v : t->flat<float>()) v = 1.0f;
  return *std::move(t);
}

void BM_MemcpyBaseline(benchmark::State& state) {
  const Tensor t = MakeTensor(state.range(0));
  std::vector<char> out(t.num_bytes());
  for (auto _ : state) {
    std::memcpy(out.data(), t.raw_data(), t.num_bytes());
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(state.iterations() * t.num_bytes());
}

void BM_ToProto(benchmark::State& state) {
  const Tensor t = MakeTensor(state.range(0));
  TensorProto proto;
  for (auto _ : state) {
    ToProto(t, &proto);
    benchmark::DoNotOptimize(proto.content().data());
  }
  state.SetBytesProcessed(state.iterations() * t.num_bytes());
}

void BM_FromProto(benchmark::State& state) {
  TensorProto proto;
  ToProto(MakeTensor(state.range(0)), &proto);
  for (auto _ : state) {
    absl::StatusOr<Tensor> t = FromProto(proto);
    benchmark::DoNotOptimize(t->raw_data());
  }
  state.SetBytesProcessed(state.iterations() * proto.content().size());
}

void BM_FromProtoInto(benchmark::State& state) {
  TensorProto proto;
  ToProto(MakeTensor(state.range(0)), &proto);
  Tensor t;
  for (auto _ : state) {
    if (!FromProtoInto(proto, &t).ok()) std::abort();
    benchmark::DoNotOptimize(t.raw_data());
  }
  state.SetBytesProcessed(state.iterations() * proto.content().size());
}

BENCHMARK(BM_MemcpyBaseline)->Arg(4 << 10)->Arg(4 << 20)->Arg(64 << 20);
BENCHMARK(BM_ToProto)->Arg(4 << 10)->Arg(4 << 20)->Arg(64 << 20);
BENCHMARK(BM_FromProto)->Arg(4 << 10)->Arg(4 << 20)->Arg(64 << 20);
BENCHMARK(BM_FromProtoInto)->Arg(4 << 10)->Arg(4 << 20)->Arg(64 << 20);

}  // namespace
}  // namespace pstrain
