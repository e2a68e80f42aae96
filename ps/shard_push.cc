// Shard::PushDense and Shard::PushSparse (shard.h): the checks every push
// passes, then its gradients applied (sync: accumulated into the step;
// async: applied at once), with a retried async push answered from the
// record instead.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <map>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "common/tensor.h"
#include "ps/shard.h"
#include "ps/staleness.h"
#include "ps/variable_error.h"

namespace pstrain {
namespace ps {
namespace {

// An owed push (RequestHeader.owed) must be a worker's sync push naming the
// batches it owes.
absl::Status CheckOwed(const UpdateConfig& update, const RequestHeader& header,
                       int worker) {
  if (!header.owed()) return absl::OkStatus();
  if (update.mode() != UpdateConfig::SYNC || worker < 0 ||
      header.batches().empty()) {
    return absl::InvalidArgumentError(
        "an owed push must be a worker's sync push naming its batches");
  }
  return absl::OkStatus();
}

// What a sync push of `header` from `worker` (< 0: not a worker) adds to a
// step.
Contribution SyncContribution(const RequestHeader& header, int worker,
                              int64_t batch_size, bool skip_update) {
  Contribution c;
  c.sender = worker;
  c.batches = header.batches();
  c.owed = header.owed();
  c.batch_size = batch_size;
  c.skip_update = skip_update;
  return c;
}

// Appends the content `pieces` of a gradient that starts at byte `offset` of
// its piece to *chunks, as runs of whole floats. A float split between two
// pieces (gRPC's buffers end anywhere) is copied into *stitched, which has
// room reserved for one per piece. The content is whole floats (checked
// before).
void AddWholeFloats(int64_t offset, absl::Span<const absl::string_view> pieces,
                    std::vector<Chunk>* chunks,
                    std::vector<std::array<char, 4>>* stitched) {
  std::array<char, 4> partial;
  size_t partial_size = 0;
  for (absl::string_view piece : pieces) {
    if (partial_size > 0) {
      const size_t n = std::min(4 - partial_size, piece.size());
      std::memcpy(partial.data() + partial_size, piece.data(), n);
      partial_size += n;
      piece.remove_prefix(n);
      if (partial_size < 4) continue;
      stitched->push_back(partial);
      chunks->push_back(
          Chunk{offset, absl::string_view(stitched->back().data(), 4)});
      offset += 4;
      partial_size = 0;
    }
    const size_t whole = piece.size() & ~size_t{3};
    if (whole > 0) {
      chunks->push_back(Chunk{offset, piece.substr(0, whole)});
      offset += whole;
    }
    partial_size = piece.size() - whole;
    std::memcpy(partial.data(), piece.data() + whole, partial_size);
  }
}

// What identifies an async push among its sender's: the worker's step when
// the header has one (a step redone is the same push), else the request id
// (a retry is). Tagged in the low bit, so the two never collide; 0: none.
uint64_t PushKey(const RequestHeader& header) {
  if (header.has_step()) return static_cast<uint64_t>(header.step()) << 1 | 1;
  return header.request_id() << 1;
}

// A push's rows with those of duplicate ids summed, in first-seen order:
// what an async update applies (it applies each row it is given).
struct SummedRows {
  std::vector<int64_t> ids;
  std::vector<float> rows;
};
SummedRows SumDuplicateRows(absl::Span<const int64_t> ids, const float* rows,
                            int64_t width) {
  SummedRows summed;
  absl::flat_hash_map<int64_t, int64_t> position;
  for (size_t i = 0; i < ids.size(); ++i) {
    auto [it, inserted] = position.emplace(ids[i], summed.ids.size());
    if (inserted) {
      summed.ids.push_back(ids[i]);
      summed.rows.insert(summed.rows.end(), rows + i * width,
                         rows + (i + 1) * width);
    } else {
      float* sum = summed.rows.data() + it->second * width;
      for (int64_t j = 0; j < width; ++j) sum[j] += rows[i * width + j];
    }
  }
  return summed;
}

}  // namespace

absl::StatusOr<int> Shard::CheckPusher(const Run& run,
                                       const RequestHeader& header,
                                       int64_t batch_size,
                                       int64_t version) const {
  PSTRAIN_RETURN_IF_ERROR(CheckGeneration(header));
  const TaskRef& sender = header.sender();
  const int worker = sender.job() == JOB_WORKER ? sender.index() : -1;
  PSTRAIN_RETURN_IF_ERROR(CheckPresent(run, worker));
  PSTRAIN_RETURN_IF_ERROR(CheckOwed(run.update, header, worker));
  if (batch_size <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("batch_size ", batch_size, " must be > 0"));
  }
  if (version < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("version ", version, " is negative"));
  }
  return worker;
}

absl::Status Shard::Refuse(absl::Status status) {
  pushes_refused_.fetch_add(1, std::memory_order_relaxed);
  return status;
}

absl::Status Shard::CheckPushVersion(const Run& run, const std::string& name,
                                     int64_t version, int64_t current) {
  if (version > current) {
    // The pusher has seen versions this shard never had: the ps restarted
    // and was created anew, and the chief has not restored it yet (or the
    // push is wrong). ABORTED, as for a push of another generation: the
    // worker asks the chief how to go on, which brings it to the restored
    // run.
    return Refuse(absl::AbortedError(absl::StrCat(
        "variable '", name, "': gradient computed from version ", version,
        ", but the variable is at version ", current,
        " (a version from the future: was this ps restarted?)")));
  }
  const int staleness = run.update.max_staleness();
  if (run.update.mode() == UpdateConfig::ASYNC && staleness >= 0 &&
      current > version + staleness) {
    return Refuse(StaleGradientError(absl::StrCat(
        "variable '", name, "': gradient computed from version ", version,
        " is too stale: the variable is at version ", current, ", beyond ",
        version, " + max_staleness ", staleness)));
  }
  return absl::OkStatus();
}

absl::Status Shard::CheckFinite(const Run& run, const std::string& name,
                                const Chunk& chunk, bool* skip) {
  // A float is NaN or Inf iff its exponent bits are all ones. This branch-
  // free pass vectorizes; the slow search below runs only on a bad gradient.
  const char* bytes = chunk.data.data();
  const int64_t count = chunk.data.size() / 4;
  uint32_t all_ones = 0;
  for (int64_t i = 0; i < count; ++i) {
    uint32_t bits;
    std::memcpy(&bits, bytes + 4 * i, 4);
    all_ones |= static_cast<uint32_t>((bits & 0x7f800000u) == 0x7f800000u);
  }
  if (all_ones == 0) return absl::OkStatus();
  for (int64_t i = 0; i < count; ++i) {
    float g;
    std::memcpy(&g, bytes + 4 * i, 4);
    if (std::isfinite(g)) continue;
    if (run.nan_policy == NAN_SKIP_STEP) {
      *skip = true;
      return absl::OkStatus();
    }
    absl::Status status = VariableError(
        name, absl::StrCat("gradient element ", chunk.offset / 4 + i, " is ",
                           std::isnan(g) ? "NaN" : "Inf", " (nan_policy ",
                           NanPolicy_Name(run.nan_policy), ")"));
    if (run.nan_policy == NAN_ABORT && options_.on_abort) {
      options_.on_abort(status);
    }
    return Refuse(std::move(status));
  }
  return absl::OkStatus();
}

absl::StatusOr<PushDenseResponse> Shard::PushDense(
    absl::Span<const PushDenseRequest* const> messages) {
  std::vector<PushDenseView> views;
  views.reserve(messages.size());
  for (const PushDenseRequest* message : messages) {
    views.push_back(ViewOf(*message));
  }
  std::vector<const PushDenseView*> pointers;
  for (const PushDenseView& view : views) pointers.push_back(&view);
  return PushDense(pointers);
}

absl::StatusOr<PushDenseResponse> Shard::PushDense(
    absl::Span<const PushDenseView* const> messages) {
  if (messages.empty()) {
    return Refuse(absl::InvalidArgumentError("push has no messages"));
  }
  const PushDenseRequest& first = messages[0]->header;
  absl::StatusOr<const Run*> checked = CheckRun(first.header());
  if (!checked.ok()) return Refuse(checked.status());
  const Run* run = *checked;
  absl::ReaderMutexLock apply_lock(&apply_mu_);
  const int64_t version = first.version();
  const int64_t batch_size = first.batch_size();
  absl::StatusOr<int> pusher =
      CheckPusher(*run, first.header(), batch_size, version);
  if (!pusher.ok()) return Refuse(pusher.status());
  const int worker = *pusher;
  const uint64_t key = PushKey(first.header());
  const bool remember =
      run->update.mode() == UpdateConfig::ASYNC && worker >= 0 && key != 0;
  // A retry is answered from the record before the checks below: it passed
  // them when it was applied, and the staleness bound may refuse it now.
  if (remember) {
    if (auto earlier = recent_dense_.Find(worker, key)) return *earlier;
  }

  // Check every gradient chunk before touching anything.
  absl::StatusOr<std::map<std::string, DensePart>> parts =
      CheckParts(*run, first.parts());
  if (!parts.ok()) return Refuse(parts.status());
  if (!parts->empty() && run->update.mode() != UpdateConfig::SYNC) {
    return Refuse(VariableError(
        parts->begin()->first,
        "a push of a part needs sync mode (an async update would apply it "
        "to the part alone, out of step with the rest)"));
  }
  std::map<DenseVariable*, std::vector<Chunk>> pushed;
  // The part pushed of each variable that has one.
  std::map<DenseVariable*, const DensePart*> part_of;
  size_t num_pieces = 0;
  for (const PushDenseView* message : messages) {
    num_pieces += message->pieces.size();
  }
  // Floats split between two of gRPC's buffers, copied whole; reserved so
  // that Chunks may point into it.
  std::vector<std::array<char, 4>> stitched;
  stitched.reserve(num_pieces);
  for (const PushDenseView* message : messages) {
    for (int i = 0; i < message->header.gradients_size(); ++i) {
      const NamedTensor& gradient = message->header.gradients(i);
      const std::string& name = gradient.name();
      auto it = run->dense.find(name);
      if (it == run->dense.end()) {
        return Refuse(VariableError(
            name, absl::StrCat("not held by ps ", options_.ps_task)));
      }
      DenseVariable* v = it->second.get();
      const TensorProto& t = gradient.tensor();
      if (t.dtype() != DT_FLOAT) {
        return Refuse(VariableError(
            name, absl::StrCat("gradient dtype ", DataTypeName(t.dtype()),
                               ", expected float32")));
      }
      // What this piece receives: the piece, or the part's rows on it.
      auto p = parts->find(name);
      const DensePart* part = p == parts->end() ? nullptr : &p->second;
      std::vector<int64_t> shape = ShapeDims(v->def().shape());
      int64_t held_begin = v->row_begin(), held_end = v->row_end();
      int64_t bytes = v->num_bytes();
      if (part != nullptr) {
        part_of[v] = part;
        shape = PartShape(v->def(), *part);
        const PartRows rows =
            PartRowsOnPiece(*part, v->def(), v->row_begin(), v->row_end());
        held_begin = rows.begin;
        held_end = rows.end;
        bytes = rows.elements * 4;
      }
      if (ShapeDims(t.shape()) != shape) {
        return Refuse(VariableError(
            name,
            absl::StrCat("gradient shape ", ShapeString(ShapeDims(t.shape())),
                         " does not match the ",
                         part != nullptr ? "part's " : "variable's ",
                         ShapeString(shape))));
      }
      const int64_t rows = t.shape().dims_size() == 0 ? 1 : t.shape().dims(0);
      const int64_t begin = t.has_slice() ? t.slice().begin() : 0;
      const int64_t end = t.has_slice() ? t.slice().end() : rows;
      if (begin != held_begin || end != held_end) {
        return Refuse(VariableError(
            name, absl::StrCat("gradient rows [", begin, ", ", end, ") but ps ",
                               options_.ps_task, " holds rows [", held_begin,
                               ", ", held_end, ")",
                               part != nullptr ? " of the part" : "")));
      }
      const int64_t offset = t.content_offset();
      const int64_t size = message->ContentSize(i);
      if (offset < 0 || offset % 4 != 0 || size % 4 != 0 ||
          offset > bytes - size) {
        return Refuse(VariableError(
            name, absl::StrCat("gradient chunk of ", size, " bytes at offset ",
                               offset, " does not fit its ", bytes,
                               " bytes in whole floats")));
      }
      AddWholeFloats(offset, message->Content(i), &pushed[v], &stitched);
    }
  }
  for (const auto& [name, part] : *parts) {
    auto it = run->dense.find(name);
    if (pushed.count(it->second.get()) == 0) {
      return Refuse(VariableError(name, "a part of it, but no gradient"));
    }
  }
  bool skip_update = false;
  for (auto& [v, chunks] : pushed) {
    auto p = part_of.find(v);
    const int64_t bytes = p == part_of.end()
                              ? v->num_bytes()
                              : PartRowsOnPiece(*p->second, v->def(),
                                                v->row_begin(), v->row_end())
                                        .elements *
                                    4;
    std::sort(chunks.begin(), chunks.end(),
              [](const Chunk& a, const Chunk& b) { return a.offset < b.offset; });
    int64_t covered = 0;
    for (const Chunk& chunk : chunks) {
      if (chunk.offset != covered) {
        return Refuse(VariableError(
            v->name(), absl::StrCat("gradient chunks overlap or leave a gap: "
                                    "a chunk starts at byte ", chunk.offset,
                                    ", expected byte ", covered)));
      }
      covered += chunk.data.size();
    }
    if (covered != bytes) {
      return Refuse(VariableError(
          v->name(), absl::StrCat("gradient chunks cover ", covered, " of its ",
                                  bytes, " bytes")));
    }
    PSTRAIN_RETURN_IF_ERROR(
        CheckPushVersion(*run, v->name(), version, v->version()));
    for (const Chunk& chunk : chunks) {
      PSTRAIN_RETURN_IF_ERROR(
          CheckFinite(*run, v->name(), chunk, &skip_update));
    }
  }

  PushDenseResponse response;
  bool applied = true;
  if (remember) {
    if (auto earlier = recent_dense_.Reserve(worker, key, version)) {
      return *earlier;
    }
  }
  // Whether this push added its batches (not a late push, not one counted
  // before).
  bool added = false;
  if (run->update.mode() == UpdateConfig::SYNC) {
    const Contribution contribution =
        SyncContribution(first.header(), worker, batch_size, skip_update);
    for (auto& [v, chunks] : pushed) {
      auto p = part_of.find(v);
      const DenseVariable::Accumulated result =
          v->AccumulateSync(version, chunks, contribution,
                            p == part_of.end() ? nullptr : p->second);
      applied &= result != DenseVariable::Accumulated::kDropped;
      added |= result == DenseVariable::Accumulated::kAdded;
    }
    response.set_version(version + 1);
  } else if (skip_update) {
    applied = false;
    response.set_version(version);
  } else {
    int64_t new_version = 0;
    for (auto& [v, chunks] : pushed) {
      new_version = std::max(new_version, v->ApplyAsync(batch_size, chunks));
    }
    added = true;
    response.set_version(new_version);
  }
  if (added && !skip_update) CountBatches(first.header());
  response.set_applied(applied);
  (applied ? pushes_applied_ : pushes_dropped_stale_)
      .fetch_add(1, std::memory_order_relaxed);
  if (remember) recent_dense_.Set(worker, key, response);
  return response;
}

absl::Status Shard::PushSparse(const PushSparseRequest& request,
                              PushSparseResponse* response) {
  absl::StatusOr<const Run*> checked = CheckRun(request.header());
  if (!checked.ok()) return Refuse(checked.status());
  const Run& run = **checked;
  absl::ReaderMutexLock apply_lock(&apply_mu_);
  absl::StatusOr<int> pusher = CheckPusher(
      run, request.header(), request.batch_size(), request.version());
  if (!pusher.ok()) return Refuse(pusher.status());
  const int worker = *pusher;
  absl::StatusOr<EmbeddingTable*> found =
      FindTable(run, request.name());
  if (!found.ok()) return Refuse(found.status());
  EmbeddingTable* table = *found;
  const std::string& name = request.name();
  // Answered from the record as in PushDense.
  const uint64_t key = PushKey(request.header());
  const std::pair<int, std::string> who(worker, name);
  const bool remember =
      run.update.mode() == UpdateConfig::ASYNC && worker >= 0 && key != 0;
  if (remember) {
    if (auto earlier = recent_sparse_.Find(who, key)) {
      *response = *earlier;
      return absl::OkStatus();
    }
  }
  const TensorProto& g = request.gradients();
  const std::vector<int64_t> expected = {request.ids_size(), table->width()};
  if (g.dtype() != DT_FLOAT || ShapeDims(g.shape()) != expected || g.has_slice() ||
      g.content_offset() != 0 ||
      static_cast<int64_t>(g.content().size()) !=
          request.ids_size() * table->width() * 4) {
    return Refuse(VariableError(
        name, absl::StrCat("row gradients must be float32 ",
                           ShapeString(expected), " in one piece; got ",
                           DataTypeName(g.dtype()), " ",
                           ShapeString(ShapeDims(g.shape())), " with ",
                           g.content().size(), " bytes")));
  }
  absl::Status ids_ok = table->CheckIds(request.ids());
  if (!ids_ok.ok()) return Refuse(ids_ok);
  PSTRAIN_RETURN_IF_ERROR(
      CheckPushVersion(run, name, request.version(), table->version()));
  const float* rows = reinterpret_cast<const float*>(g.content().data());
  bool skip_update = false;
  PSTRAIN_RETURN_IF_ERROR(
      CheckFinite(run, name, Chunk{0, g.content()}, &skip_update));

  if (remember) {
    if (auto earlier = recent_sparse_.Reserve(who, key, request.version())) {
      *response = *earlier;
      return absl::OkStatus();
    }
  }
  bool applied = true;
  if (run.update.mode() == UpdateConfig::SYNC) {
    // The step's sums add the rows of duplicate ids as they come.
    applied = table->AccumulateSync(
        request.version(), request.ids(), rows,
        SyncContribution(request.header(), worker, request.batch_size(),
                         skip_update));
    response->set_version(request.version() + 1);
  } else if (skip_update) {
    applied = false;
    response->set_version(request.version());
  } else {
    const SummedRows summed =
        SumDuplicateRows(request.ids(), rows, table->width());
    response->set_version(table->ApplyAsync(summed.ids, summed.rows.data(),
                                            request.batch_size()));
  }
  response->set_applied(applied);
  (applied ? pushes_applied_ : pushes_dropped_stale_)
      .fetch_add(1, std::memory_order_relaxed);
  if (remember) recent_sparse_.Set(who, key, *response);
  return absl::OkStatus();
}

void Shard::CountBatches(const RequestHeader& header) {
  if (!options_.count_batches) return;
  absl::MutexLock lock(&ledger_mu_);
  for (int64_t batch : header.batches()) ++batches_applied_[batch];
}

}  // namespace ps
}  // namespace pstrain
