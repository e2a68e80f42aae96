#include "ps/dense_checkpoint.h"

#include "common/crc32c.h"

namespace pstrain {
namespace ps {

absl::Status AppendDenseArrays(
    const std::map<std::string, std::unique_ptr<DenseVariable>>& variables,
    const std::string& file, AtomicFile* out,
    google::protobuf::RepeatedPtrField<SavedSlice>* slices) {
  absl::Status status;
  for (const auto& [name, v] : variables) {
    const int first = slices->size();
    const int64_t version = v->ReadArrays(
        [&, v = v.get()](int array, const char* data, int64_t size) {
          if (!status.ok()) return;
          absl::StatusOr<int64_t> offset = out->Append(data, size);
          if (!offset.ok()) {
            status = offset.status();
            return;
          }
          SavedSlice* slice = slices->Add();
          slice->set_name(v->ArrayName(array));
          slice->mutable_rows()->set_begin(v->row_begin());
          slice->mutable_rows()->set_end(v->row_end());
          slice->set_num_rows(v->row_end() - v->row_begin());
          slice->set_file(file);
          slice->set_offset(*offset);
          slice->set_length(size);
          slice->set_crc32c(Crc32c(data, size));
        });
    if (!status.ok()) return status;
    for (int i = first; i < slices->size(); ++i) {
      slices->Mutable(i)->set_version(version);
    }
  }
  return absl::OkStatus();
}

}  // namespace ps
}  // namespace pstrain
