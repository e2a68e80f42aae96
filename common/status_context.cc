#include "common/status_context.h"

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"

namespace pstrain {

absl::Status WithContext(absl::string_view context,
                         const absl::Status& status) {
  if (status.ok()) return status;
  absl::Status result(status.code(),
                      absl::StrCat(context, ": ", status.message()));
  status.ForEachPayload(
      [&result](absl::string_view type_url, const absl::Cord& value) {
        result.SetPayload(type_url, value);
      });
  return result;
}

}  // namespace pstrain
