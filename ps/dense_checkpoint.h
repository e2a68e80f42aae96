// A checkpoint's data file as far as dense variables go: every array of
// each variable (its value, then its optimizer slots) appended raw, one
// SavedSlice each for the checkpoint index (chief/checkpoint_writer.h). A
// ps shard writes its pieces with it (ps/shard.h, Save), and a collective
// run's worker 0 its whole replica (collective/replica_checkpoint.h), so both
// write the same layout and either restores the other's checkpoints.
//
//   PSTRAIN_ASSIGN_OR_RETURN(auto out, AtomicFile::Create(dir + "/" + file));
//   PSTRAIN_RETURN_IF_ERROR(AppendDenseArrays(variables, file, out.get(),
//                                             response.mutable_slices()));
//   PSTRAIN_RETURN_IF_ERROR(out->Commit());
#ifndef PSTRAIN_PS_DENSE_CHECKPOINT_H_
#define PSTRAIN_PS_DENSE_CHECKPOINT_H_

#include <map>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "common/atomic_file.h"
#include "google/protobuf/repeated_ptr_field.h"
#include "proto/ps_service.pb.h"
#include "ps/dense_variable.h"

namespace pstrain {
namespace ps {

// Appends the arrays of every one of `variables` to `out` (the file called
// `file` in the checkpoint directory), each variable's read under one lock
// (a consistent state), and adds a slice per array to `slices`: name, rows,
// file, offset, length, CRC32C and the variable's version.
absl::Status AppendDenseArrays(
    const std::map<std::string, std::unique_ptr<DenseVariable>>& variables,
    const std::string& file, AtomicFile* out,
    google::protobuf::RepeatedPtrField<SavedSlice>* slices);

}  // namespace ps
}  // namespace pstrain

#endif  // PSTRAIN_PS_DENSE_CHECKPOINT_H_
