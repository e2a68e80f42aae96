#include "chief/event_writer.h"

#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "common/atomic_file.h"
#include "common/status_macros.h"

namespace pstrain {
namespace chief {
namespace {

std::string HostName() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0 || name[0] == '\0') {
    return "localhost";
  }
  return name;
}

// A value under `tag` owned by TensorBoard plugin `plugin`.
tensorboard::Summary::Value* AddValue(tensorboard::Event& event,
                                      const std::string& tag,
                                      const std::string& plugin,
                                      tensorboard::DataClass data_class) {
  tensorboard::Summary::Value* value = event.mutable_summary()->add_value();
  value->set_tag(tag);
  value->mutable_metadata()->mutable_plugin_data()->set_plugin_name(plugin);
  value->mutable_metadata()->set_data_class(data_class);
  return value;
}

}  // namespace

absl::StatusOr<std::unique_ptr<EventWriter>> EventWriter::Create(
    const std::string& dir) {
  PSTRAIN_RETURN_IF_ERROR(MakeDirectories(dir));
  const std::string base = absl::StrCat(dir, "/events.out.tfevents.",
                                        absl::ToUnixSeconds(absl::Now()), ".",
                                        HostName(), ".", getpid());
  // A second writer of this process in this second: the next free number.
  absl::StatusOr<std::unique_ptr<TfRecordWriter>> file;
  for (int n = 0; n < 1000; ++n) {
    file = TfRecordWriter::Create(n == 0 ? absl::StrCat(base, ".v2")
                                         : absl::StrCat(base, ".", n, ".v2"));
    if (!absl::IsAlreadyExists(file.status())) break;
  }
  PSTRAIN_RETURN_IF_ERROR(file.status());
  std::unique_ptr<EventWriter> writer(new EventWriter(std::move(*file)));
  tensorboard::Event version;
  version.set_file_version(kEventFileVersion);
  PSTRAIN_RETURN_IF_ERROR(writer->Write(version));
  return writer;
}

absl::Status EventWriter::WriteScalars(
    int64_t step, const std::vector<std::pair<std::string, double>>& values) {
  tensorboard::Event event;
  event.set_step(step);
  for (const auto& [tag, number] : values) {
    tensorboard::TensorProto* tensor =
        AddValue(event, tag, "scalars", tensorboard::DATA_CLASS_SCALAR)
            ->mutable_tensor();
    tensor->set_dtype(tensorboard::DT_FLOAT);
    tensor->mutable_tensor_shape();  // rank 0
    tensor->add_float_val(static_cast<float>(number));
  }
  return Write(event);
}

absl::Status EventWriter::WriteText(int64_t step, const std::string& tag,
                                    const std::string& text) {
  tensorboard::Event event;
  event.set_step(step);
  tensorboard::TensorProto* tensor =
      AddValue(event, tag, "text", tensorboard::DATA_CLASS_TENSOR)
          ->mutable_tensor();
  tensor->set_dtype(tensorboard::DT_STRING);
  tensor->mutable_tensor_shape();
  tensor->add_string_val(text);
  return Write(event);
}

absl::Status EventWriter::Write(tensorboard::Event& event) {
  event.set_wall_time(absl::ToDoubleSeconds(absl::Now() - absl::UnixEpoch()));
  return file_->Write(event.SerializeAsString());
}

}  // namespace chief
}  // namespace pstrain
