// Writes the binary seed inputs of the fuzz targets into the corpus
// directories, as "seed-<what>" files (other files there, such as the inputs
// of bugs found, are left alone). The text seeds (JSON, CSV) are written by
// hand; these are built from real messages, checkpoints and files:
//
//   bazel run //tests/fuzz:make_seeds -- $PWD/tests/fuzz/corpus
//
// Seeds are valid inputs and near misses, each small (a few hundred bytes),
// so that the fuzzers start from the code's interesting paths.
#include <zlib.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "chief/checkpoint_writer.h"
#include "collective/ring_plan.h"
#include "collective/ring_wire.h"
#include "proto/checkpoint.pb.h"
#include "proto/chief_service.pb.h"
#include "proto/collective.pb.h"
#include "proto/ps_service.pb.h"
#include "ps/shard.h"
#include "ps/tensor_encoding.h"
#include "tests/fuzz/fixtures.h"
#include "tests/fuzz/fuzz_util.h"

namespace pstrain {
namespace fuzz {
namespace {

std::string g_corpus;  // The corpus root, from argv.

void Fail(const std::string& what) {
  std::fprintf(stderr, "make_seeds: %s\n", what.c_str());
  std::exit(1);
}

void Write(const std::string& target, const std::string& name,
           const std::string& bytes) {
  const std::string dir = absl::StrCat(g_corpus, "/", target);
  std::filesystem::create_directories(dir);
  const std::string path = absl::StrCat(dir, "/seed-", name);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), bytes.size());
  if (!out) Fail("cannot write " + path);
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) Fail("cannot read " + path);
  return std::string(std::istreambuf_iterator<char>(in),
                     std::istreambuf_iterator<char>());
}

std::string Gzip(const std::string& bytes) {
  z_stream zs = {};
  if (deflateInit2(&zs, 9, Z_DEFLATED, 16 + MAX_WBITS, 8,
                   Z_DEFAULT_STRATEGY) != Z_OK) {
    Fail("deflateInit2");
  }
  std::string out(deflateBound(&zs, bytes.size()), '\0');
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data()));
  zs.avail_in = bytes.size();
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = out.size();
  if (deflate(&zs, Z_FINISH) != Z_STREAM_END) Fail("deflate");
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}

std::string BigEndian32(uint32_t v) {
  std::string out(4, '\0');
  for (int i = 0; i < 4; ++i) out[i] = static_cast<char>(v >> (24 - 8 * i));
  return out;
}

// ---------------------------------------------------------------------------
// IDX: num_classes byte, images file as a record, labels file.

std::string IdxImages(uint32_t n, uint32_t rows, uint32_t cols) {
  std::string out = BigEndian32(0x803) + BigEndian32(n) + BigEndian32(rows) +
                    BigEndian32(cols);
  for (uint32_t i = 0; i < n * rows * cols; ++i) out.push_back(i * 37 % 256);
  return out;
}

std::string IdxLabels(const std::string& labels) {
  return BigEndian32(0x801) + BigEndian32(labels.size()) + labels;
}

std::string IdxInput(uint8_t classes, const std::string& images,
                     const std::string& labels) {
  return FuzzWriter().Byte(classes).Record(images).Raw(labels).bytes();
}

void IdxSeeds() {
  const std::string images = IdxImages(3, 2, 4);
  const std::string labels = IdxLabels(std::string("\x00\x09\x04", 3));
  Write("idx", "valid", IdxInput(10, images, labels));
  Write("idx", "gzip", IdxInput(10, Gzip(images), Gzip(labels)));
  Write("idx", "gzip_concatenated",
        IdxInput(10, Gzip(images.substr(0, 9)) + Gzip(images.substr(9)),
                 labels));
  Write("idx", "label_out_of_range", IdxInput(5, images, labels));
  Write("idx", "truncated", IdxInput(10, images.substr(0, 20), labels));
  Write("idx", "trailing_bytes", IdxInput(10, images + "xy", labels));
  Write("idx", "count_mismatch",
        IdxInput(10, images, IdxLabels(std::string("\x01\x02", 2))));
  Write("idx", "wrong_magic", IdxInput(10, labels, images));
  Write("idx", "huge_dims",
        IdxInput(10,
                 BigEndian32(0x803) + BigEndian32(0xffffffff) +
                     BigEndian32(0xffffffff) + BigEndian32(0x10000),
                 labels));
  Write("idx", "corrupt_gzip",
        IdxInput(10, Gzip(images).substr(0, 25) + "\xff\xff", labels));
}

void CsvSeeds() {
  // Options byte 0: no header, label last; classes 0: the largest + 1.
  const std::string csv = "1.5,2,0\n3, 4e-3 ,1\r\n\n-7,0.25,2\n";
  Write("csv", "gzip",
        FuzzWriter().Byte(0).Byte(3).Raw(Gzip(csv)).bytes());
}

// ---------------------------------------------------------------------------
// Requests to the ps shard fixture (ps_shard_fuzzer.cc).

RequestHeader Header(uint64_t request_id = 0) {
  RequestHeader header;
  header.set_run_id(kRunId);
  header.mutable_sender()->set_job(JOB_WORKER);
  header.set_request_id(request_id);
  return header;
}

NamedTensor Gradient(const std::string& name, std::vector<int64_t> dims,
                     int64_t begin, int64_t end, std::vector<float> values,
                     int64_t offset = 0) {
  NamedTensor g;
  g.set_name(name);
  TensorProto* t = g.mutable_tensor();
  t->set_dtype(DT_FLOAT);
  for (int64_t d : dims) t->mutable_shape()->add_dims(d);
  if (!dims.empty()) {
    t->mutable_slice()->set_begin(begin);
    t->mutable_slice()->set_end(end);
  }
  t->set_content_offset(offset * 4);
  t->set_content(values.data(), values.size() * 4);
  return g;
}

PushDenseRequest Push(int64_t version, uint64_t request_id) {
  PushDenseRequest push;
  *push.mutable_header() = Header(request_id);
  push.set_version(version);
  push.set_batch_size(8);
  *push.add_gradients() =
      Gradient("dense/kernel", {4, 3}, 0, 2, {1, 2, 3, 4, 5, 6});
  *push.add_gradients() = Gradient("dense/bias", {3}, 0, 3, {0.5, -1, 2});
  *push.add_gradients() = Gradient("scalar", {}, 0, 1, {3});
  return push;
}

PullDenseRequest Pull(int64_t min_version) {
  PullDenseRequest pull;
  *pull.mutable_header() = Header();
  pull.set_min_version(min_version);
  return pull;
}

PushSparseRequest PushSparse(const std::string& name, std::vector<int64_t> ids,
                             int64_t version) {
  PushSparseRequest push;
  *push.mutable_header() = Header(9);
  push.set_name(name);
  std::vector<float> rows;
  for (size_t i = 0; i < ids.size(); ++i) {
    push.add_ids(ids[i]);
    rows.push_back(0.5f * i);
    rows.push_back(-1.0f);
  }
  TensorProto* g = push.mutable_gradients();
  g->set_dtype(DT_FLOAT);
  g->mutable_shape()->add_dims(ids.size());
  g->mutable_shape()->add_dims(2);
  g->set_content(rows.data(), rows.size() * 4);
  push.set_version(version);
  push.set_batch_size(4);
  return push;
}

PullSparseRequest PullSparse(const std::string& name, std::vector<int64_t> ids) {
  PullSparseRequest pull;
  *pull.mutable_header() = Header();
  pull.set_name(name);
  for (int64_t id : ids) pull.add_ids(id);
  return pull;
}

// Op codes of ps_shard_fuzzer.cc.
enum PsOp : uint8_t {
  kCreate = 0,
  kCreateFresh = 1,
  kPullDense = 2,
  kPushDense = 3,
  kPullSparse = 4,
  kPushSparse = 5,
  kSave = 6,
  kRestore = 7,
  kStatus = 8,
  kSetWorkers = 9,
};

// Whether the seeds being written hold text-format messages (each ps and
// chief seed is written both ways).
bool g_text = false;

uint8_t OpByte(uint8_t op) { return op | (g_text ? 0x80 : 0); }

FuzzWriter& Op(FuzzWriter& w, PsOp op, const google::protobuf::Message& m) {
  return w.Byte(OpByte(op)).Message(m, g_text);
}

FuzzWriter& PushOp(FuzzWriter& w, const std::vector<PushDenseRequest>& m) {
  w.Byte(OpByte(kPushDense)).Byte(m.size() - 1);
  for (const PushDenseRequest& message : m) w.Message(message, g_text);
  return w;
}

// `name`, or `name`-text for the text-format variant.
std::string SeedName(const std::string& name) {
  return g_text ? name + "-text" : name;
}

// The SaveResponse of the fixture of `mode` after one sparse push, as the
// fuzzer's Save would write it: a Restore request from it.
RestoreRequest RestoreOfSaved(uint8_t mode) {
  ps::ShardOptions options;
  options.default_step_timeout = absl::Milliseconds(1);
  options.checkpoint_root = TempDir();
  ps::Shard shard(options);
  CreateVariablesResponse created;
  if (!shard.CreateVariables(ShardFixture(mode), &created).ok()) {
    Fail("fixture");
  }
  PushSparseResponse pushed;
  if (!shard.PushSparse(PushSparse("hashed", {4, 12, 4}, 0), &pushed).ok()) {
    Fail("push to hashed");
  }
  SaveRequest save;
  *save.mutable_header() = Header();
  save.set_directory("save");
  SaveResponse saved;
  const absl::Status status = shard.Save(save, &saved);
  if (!status.ok()) Fail("save: " + status.ToString());
  RestoreRequest restore;
  *restore.mutable_header() = Header();
  restore.set_directory("ckpt");
  *restore.mutable_slices() = saved.slices();
  restore.set_step(0);
  return restore;
}

void PsSeeds() {
  constexpr uint8_t kAsyncAdam = 6, kSyncSgd = 1, kSyncMomentumSkip = 0x0b;
  {
    FuzzWriter w;
    w.Byte(kAsyncAdam);
    PushOp(w, {Push(0, 1)});
    Op(w, kPullDense, Pull(0));
    PushOp(w, {Push(0, 1)});  // a retry
    GetShardStatusRequest status;
    *status.mutable_header() = Header();
    Op(w, kStatus, status);
    Write("ps_shard", SeedName("async_push_pull"), w.bytes());
  }
  {
    // Two workers' sync pushes, the second split into chunks over two
    // messages, then a pull of the next step.
    PushDenseRequest first = Push(0, 1);
    first.mutable_header()->mutable_sender()->set_index(0);
    PushDenseRequest second = Push(0, 2);
    second.mutable_header()->mutable_sender()->set_index(1);
    PushDenseRequest rest;
    *rest.add_gradients() = second.gradients(0);
    rest.mutable_gradients(0)->mutable_tensor()->set_content(
        second.gradients(0).tensor().content().substr(12));
    rest.mutable_gradients(0)->mutable_tensor()->set_content_offset(12);
    second.mutable_gradients(0)->mutable_tensor()->set_content(
        second.gradients(0).tensor().content().substr(0, 12));
    FuzzWriter w;
    w.Byte(kSyncSgd);
    PushOp(w, {first});
    PushOp(w, {second, rest});
    Op(w, kPullDense, Pull(1));
    Op(w, kPullDense, Pull(5));  // times out
    Write("ps_shard", SeedName("sync_two_workers"), w.bytes());
  }
  {
    // Worker 1 presumed dead: worker 0's push alone completes the step;
    // worker 1's is refused; then both again, and a bad count.
    SetWorkersRequest one;
    *one.mutable_header() = Header();
    one.set_replicas_to_aggregate(1);
    one.add_absent_workers(1);
    PushDenseRequest first = Push(0, 1);
    PushDenseRequest second = Push(0, 2);
    second.mutable_header()->mutable_sender()->set_index(1);
    SetWorkersRequest both;
    *both.mutable_header() = Header();
    both.set_replicas_to_aggregate(2);
    SetWorkersRequest bad = both;
    bad.set_replicas_to_aggregate(3);
    bad.add_absent_workers(-1);
    FuzzWriter w;
    w.Byte(kSyncSgd);
    Op(w, kSetWorkers, one);
    PushOp(w, {first});
    PushOp(w, {second});
    Op(w, kPullDense, Pull(1));
    Op(w, kSetWorkers, both);
    Op(w, kSetWorkers, bad);
    Write("ps_shard", SeedName("set_workers"), w.bytes());
  }
  {
    PushDenseRequest nan = Push(0, 3);
    const float bad[] = {1, std::nanf(""), 2};
    nan.mutable_gradients(1)->mutable_tensor()->set_content(bad, sizeof(bad));
    PushDenseRequest wrong = Push(0, 4);
    wrong.mutable_gradients(0)->mutable_tensor()->mutable_shape()->set_dims(1, 4);
    PushDenseRequest other_run = Push(0, 5);
    other_run.mutable_header()->set_run_id("another");
    FuzzWriter w;
    w.Byte(kSyncMomentumSkip);
    PushOp(w, {nan});
    PushOp(w, {wrong});
    PushOp(w, {other_run});
    Write("ps_shard", SeedName("refused_pushes"), w.bytes());
  }
  {
    FuzzWriter w;
    w.Byte(kAsyncAdam);
    Op(w, kPushSparse, PushSparse("emb", {1, 4, 1}, 0));
    Op(w, kPullSparse, PullSparse("emb", {4, 1, 0}));
    Op(w, kPushSparse, PushSparse("hashed", {6, 1ll << 40, 6}, 0));
    Op(w, kPushSparse, PushSparse("hashed", {-5, 3}, 0));  // refused
    Op(w, kPullSparse, PullSparse("hashed", {1ll << 40, 7}));
    Op(w, kPullSparse, PullSparse("emb", {9}));  // another ps's row
    Write("ps_shard", SeedName("sparse"), w.bytes());
  }
  {
    SaveRequest save;
    *save.mutable_header() = Header();
    save.set_directory("ckpt");
    FuzzWriter w;
    w.Byte(kAsyncAdam);
    Op(w, kPushSparse, PushSparse("hashed", {4, 12, 4}, 0));
    Op(w, kSave, save);
    Op(w, kRestore, RestoreOfSaved(kAsyncAdam));
    Op(w, kPullDense, Pull(0));
    Write("ps_shard", SeedName("save_restore"), w.bytes());
  }
  {
    CreateVariablesRequest fresh = ShardFixture(kSyncSgd);
    fresh.mutable_header()->set_run_id("fresh-run");
    CreateVariablesRequest same = ShardFixture(kAsyncAdam);
    FuzzWriter w;
    w.Byte(kAsyncAdam);
    Op(w, kCreate, same);
    Op(w, kCreate, fresh);
    Op(w, kCreateFresh, fresh);
    PullDenseRequest pull = Pull(0);
    pull.mutable_header()->set_run_id("fresh-run");
    Op(w, kPullDense, pull);
    Write("ps_shard", SeedName("create"), w.bytes());
  }
}

// ---------------------------------------------------------------------------
// The checkpoint of a saved fixture shard: name record, index record, data.

void CheckpointSeeds() {
  ps::ShardOptions options;
  options.default_step_timeout = absl::Milliseconds(1);
  options.checkpoint_root = TempDir();
  ps::Shard shard(options);
  CreateVariablesResponse created;
  const CreateVariablesRequest create = ShardFixture(6);  // async, Adam
  if (!shard.CreateVariables(create, &created).ok()) Fail("fixture");
  PushSparseResponse pushed;
  if (!shard.PushSparse(PushSparse("hashed", {4, 12}, 0), &pushed).ok()) {
    Fail("push to hashed");
  }
  const std::string dir = TempDir() + "/ckpt-seed";
  SaveRequest save;
  *save.mutable_header() = Header();
  save.set_directory("ckpt-seed");
  SaveResponse saved;
  if (!shard.Save(save, &saved).ok()) Fail("save");
  // Only ps 0's pieces exist: the index covers the variables whose rows are
  // all here (the bias, the scalar, the growing table).
  chief::CheckpointInfo info;
  info.run_id = kRunId;
  info.step = 7;
  for (const ShardVariable& v : create.variables()) {
    if (v.def().name() == "dense/kernel" || v.def().name() == "emb") continue;
    *info.config.add_variables() = v.def();
  }
  std::vector<SavedSlice> slices;
  for (const SavedSlice& s : saved.slices()) {
    if (s.name().rfind("dense/kernel", 0) == 0 || s.name().rfind("emb", 0) == 0) {
      continue;
    }
    slices.push_back(s);
  }
  absl::StatusOr<CheckpointIndex> index =
      chief::BuildCheckpointIndex(info, slices);
  if (!index.ok()) Fail("index: " + index.status().ToString());
  index->set_format_version(chief::kCheckpointFormatVersion);
  index->set_created_unix_micros(1'700'000'000'000'000);  // Reproducible.
  const std::string data = ReadFile(dir + "/ps-0.data");
  auto input = [&](const std::string& name, const CheckpointIndex& i,
                   const std::string& d) {
    return FuzzWriter().Byte(g_text).Record(name).Message(i, g_text).Raw(d).bytes();
  };
  Write("checkpoint", SeedName("valid"), input("ckpt-7", *index, data));
  Write("checkpoint", SeedName("short_data"),
        input("ckpt-", *index, data.substr(0, data.size() / 2)));
  CheckpointIndex version = *index;
  version.set_format_version(2);
  Write("checkpoint", SeedName("format_version"), input("ckpt-0012", version, data));
  CheckpointIndex moved = *index;
  FileRegion* region =
      moved.mutable_variables(0)->mutable_slices(0)->mutable_values();
  region->set_offset(region->offset() + 4);
  Write("checkpoint", SeedName("crc_mismatch"), input("x", moved, data));
  CheckpointIndex missing = *index;
  missing.mutable_config()->add_variables()->set_name("nowhere");
  Write("checkpoint", SeedName("missing_variable"), input("ckpt-1", missing, data));
}

// ---------------------------------------------------------------------------
// Pull replies and push requests as the ps and worker encode them.

std::string Flatten(const grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  if (!buffer.Dump(&slices).ok()) Fail("Dump");
  std::string out;
  for (const grpc::Slice& s : slices) {
    out.append(reinterpret_cast<const char*>(s.begin()), s.size());
  }
  return out;
}

void TensorEncodingSeeds() {
  // A pull reply packing a chunk of one variable and the whole of another.
  PullDenseResponse header;
  header.set_version(3);
  NamedTensor* value = header.add_values();
  value->set_name("dense/kernel");
  TensorProto* t = value->mutable_tensor();
  t->set_dtype(DT_FLOAT);
  t->mutable_shape()->add_dims(4);
  t->mutable_shape()->add_dims(3);
  t->mutable_slice()->set_begin(0);
  t->mutable_slice()->set_end(2);
  t->set_content_offset(8);
  NamedTensor* bias = header.add_values();
  bias->set_name("dense/bias");
  bias->mutable_tensor()->set_dtype(DT_FLOAT);
  bias->mutable_tensor()->mutable_shape()->add_dims(2);
  const float content[] = {1, 2, 3, 4};
  const float bias_content[] = {5, 6};
  const grpc::Slice values[] = {
      ps::EncodePullDenseValue(header.values(0),
                               reinterpret_cast<const char*>(content),
                               sizeof(content)),
      ps::EncodePullDenseValue(header.values(1),
                               reinterpret_cast<const char*>(bias_content),
                               sizeof(bias_content))};
  const std::string pull = Flatten(ps::EncodePullDenseResponse(header, values));
  Write("tensor_encoding", "pull", FuzzWriter().Byte(0).Raw(pull).bytes());
  Write("tensor_encoding", "pull_in_pieces",
        FuzzWriter().Byte(3).Raw(pull).bytes());
  Write("tensor_encoding", "pull_truncated",
        FuzzWriter().Byte(7).Raw(pull.substr(0, pull.size() - 3)).bytes());
  // Protobuf's own serialization, content first, plus an unknown field.
  PullDenseResponse full = header;
  full.mutable_values(0)->mutable_tensor()->set_content(content, 8);
  full.mutable_values(1)->mutable_tensor()->set_content(bias_content, 8);
  Write("tensor_encoding", "pull_protobuf",
        FuzzWriter()
            .Byte(1)
            .Raw(full.SerializeAsString() + std::string("\xa0\x06\x01", 3))
            .bytes());
  PushDenseRequest push = Push(2, 7);
  Write("tensor_encoding", "push",
        FuzzWriter().Byte(0).Raw(push.SerializeAsString()).bytes());
}

// ---------------------------------------------------------------------------
// Requests to the chief's RunState (run_state_fuzzer.cc).

RequestHeader ChiefHeader(JobType job, int index) {
  RequestHeader header;
  header.set_run_id(kRunId);
  header.mutable_sender()->set_job(job);
  header.mutable_sender()->set_index(index);
  return header;
}

void RunStateSeeds() {
  auto op = [](FuzzWriter& w, uint8_t code,
               const google::protobuf::Message& m) -> FuzzWriter& {
    return w.Byte(OpByte(code)).Message(m, g_text);
  };
  FuzzWriter w;
  const std::pair<JobType, int> tasks[] = {
      {JOB_PS, 0}, {JOB_PS, 1}, {JOB_WORKER, 0}, {JOB_WORKER, 1},
      {JOB_WORKER, 2}};
  for (const auto& [job, index] : tasks) {
    RegisterRequest r;
    *r.mutable_header() = ChiefHeader(job, index);
    r.mutable_header()->clear_run_id();  // Before it knows the run.
    r.set_incarnation(100 + index);
    op(w, 0, r);
  }
  w.Byte(5).Record(std::string(1, PHASE_TRAINING));
  for (int worker = 0; worker < 3; ++worker) {
    HeartbeatRequest h;
    *h.mutable_header() = ChiefHeader(JOB_WORKER, worker);
    h.set_step(worker + 1);
    op(w, 1, h);
  }
  ReportMetricsRequest m;
  *m.mutable_header() = ChiefHeader(JOB_WORKER, 1);
  m.set_step(2);
  m.set_loss(0.7);
  m.set_accuracy(0.5);
  m.set_examples_per_sec(1000);
  m.set_num_steps(2);
  op(w, 3, m);
  GetTrainingStateRequest g;
  *g.mutable_header() = ChiefHeader(JOB_WORKER, 2);
  op(w, 2, g);
  w.Byte(6).Record("");                 // PauseAtNextStep
  w.Byte(7).Record(std::string(1, 2));  // queries
  TrainingFinishedRequest f;
  *f.mutable_header() = ChiefHeader(JOB_WORKER, 0);
  f.set_step(100);
  op(w, 4, f);
  Write("run_state", SeedName("training"), w.bytes());

  FuzzWriter bad;
  RegisterRequest stranger;
  *stranger.mutable_header() = ChiefHeader(JOB_WORKER, 7);
  op(bad, 0, stranger);
  RegisterRequest evaluator;
  *evaluator.mutable_header() = ChiefHeader(JOB_EVALUATOR, 0);
  op(bad, 0, evaluator);
  RegisterRequest other_cluster;
  *other_cluster.mutable_header() = ChiefHeader(JOB_PS, 0);
  other_cluster.set_cluster("ps:0=elsewhere:1");
  op(bad, 0, other_cluster);
  HeartbeatRequest other_run;
  *other_run.mutable_header() = ChiefHeader(JOB_WORKER, 0);
  other_run.mutable_header()->set_run_id("another");
  op(bad, 1, other_run);
  ReportMetricsRequest zero = m;
  zero.set_examples_per_sec(0);
  op(bad, 3, zero);
  TrainingFinishedRequest ps_finished;
  *ps_finished.mutable_header() = ChiefHeader(JOB_PS, 1);
  op(bad, 4, ps_finished);
  bad.Byte(6).Record(std::string("\x05\0\0\0\0\0\0\0", 8));
  bad.Byte(7).Record(std::string(1, '\xc8'));
  Write("run_state", SeedName("refused"), bad.bytes());
}

// ---------------------------------------------------------------------------
// A left neighbour's streams to rank 1 of a ring (ring_fuzzer.cc).

// The input's three leading bytes: options, layout, id (id 1).
FuzzWriter RingInput(int size, bool bf16, int elements, int chunk_elements) {
  FuzzWriter w;
  w.Byte((size == 3 ? 1 : 0) | (bf16 ? 2 : 0) | 4)
      .Byte(elements | (chunk_elements * (bf16 ? 2 : 4) / 4 - 1) << 5)
      .Byte(0);
  return w;
}

// Message `m` as the next record: binary with its bytes cut into pieces of
// `cut` (0 whole), or text.
void RingMessageOp(FuzzWriter& w, const RingMessage& m, bool text, int cut) {
  w.Byte(text ? 0x80 : cut).Message(m, text);
}

// A whole stream of all-reduce 1 from rank 0 to rank 1: the header, then
// every chunk rank 1 receives, each payload `value` in every element.
void RingStream(FuzzWriter& w, int size, bool bf16, int elements,
                int chunk_elements, bool text, float value) {
  RingMessage m;
  RingStreamHeader* header = m.mutable_header();
  header->set_collective_id(1);
  header->set_sender_rank(0);
  header->set_ring_size(size);
  header->set_num_elements(elements);
  header->set_chunk_elements(chunk_elements);
  header->set_dtype(bf16 ? RING_DTYPE_BFLOAT16 : RING_DTYPE_FLOAT32);
  RingMessageOp(w, m, text, 0);
  const collective::RingPlan plan =
      *collective::RingPlan::Make(size, elements, chunk_elements);
  for (int step = 0; step < plan.num_steps(); ++step) {
    const int segment = plan.ReceiveSegment(1, step);
    for (int c = 0; c < plan.NumChunks(segment); ++c) {
      RingMessage chunk;
      chunk.mutable_chunk()->set_step(step);
      chunk.mutable_chunk()->set_index(c);
      std::string payload;
      for (int64_t i = 0; i < plan.ChunkLength(segment, c); ++i) {
        char bytes[4];
        std::memcpy(bytes, &value, 4);
        // bfloat16: the float's high half (little-endian).
        payload.append(bf16 ? bytes + 2 : bytes, bf16 ? 2 : 4);
      }
      if (text) {
        chunk.mutable_chunk()->set_payload(payload);
        RingMessageOp(w, chunk, true, 0);
      } else {
        // As a sender writes it, cut in two.
        w.Byte(3).Record(
            Flatten(collective::EncodeRingChunk(step, c, payload)));
      }
    }
  }
}

void RingSeeds() {
  for (bool text : {false, true}) {
    const std::string suffix = text ? "-text" : "";
    FuzzWriter whole = RingInput(2, false, 10, 4);
    RingStream(whole, 2, false, 10, 4, text, 0.5f);
    Write("ring", "ring_of_2" + suffix, whole.bytes());
    FuzzWriter three = RingInput(3, true, 7, 2);
    RingStream(three, 3, true, 7, 2, text, 2.0f);
    Write("ring", "ring_of_3_bf16" + suffix, three.bytes());
  }
  // A stream that gives up, then a second one of the same all-reduce, a
  // stream from the wrong rank, and one of an all-reduce of another layout.
  FuzzWriter refused = RingInput(2, false, 5, 2);
  RingStream(refused, 2, false, 5, 2, false, 1.0f);
  RingMessage abort;
  abort.set_abort("rank 0: its left neighbour went away");
  RingMessageOp(refused, abort, false, 0);
  RingStream(refused, 2, false, 5, 2, false, 1.0f);
  RingMessage header;
  header.mutable_header()->set_collective_id(3);
  header.mutable_header()->set_sender_rank(1);
  header.mutable_header()->set_ring_size(2);
  header.mutable_header()->set_num_elements(5);
  header.mutable_header()->set_chunk_elements(2);
  header.mutable_header()->set_dtype(RING_DTYPE_FLOAT32);
  RingMessageOp(refused, header, false, 0);
  header.mutable_header()->set_sender_rank(0);
  header.mutable_header()->set_num_elements(1 << 20);
  RingMessageOp(refused, header, true, 0);
  RingMessage chunk;
  chunk.mutable_chunk()->set_step(1);
  chunk.mutable_chunk()->set_payload(std::string(12, '\0'));
  RingMessageOp(refused, chunk, false, 1);
  Write("ring", "refused", refused.bytes());
}

}  // namespace
}  // namespace fuzz
}  // namespace pstrain

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_seeds <tests/fuzz/corpus directory>\n");
    return 2;
  }
  pstrain::fuzz::g_corpus = argv[1];
  pstrain::fuzz::IdxSeeds();
  pstrain::fuzz::CsvSeeds();
  for (bool text : {false, true}) {
    pstrain::fuzz::g_text = text;
    pstrain::fuzz::PsSeeds();
    pstrain::fuzz::CheckpointSeeds();
    pstrain::fuzz::RunStateSeeds();
  }
  pstrain::fuzz::TensorEncodingSeeds();
  pstrain::fuzz::RingSeeds();
  std::printf("make_seeds: wrote the seeds under %s\n", argv[1]);
  return 0;
}
