#include "chief/checkpoint_layout.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <system_error>

#include "absl/strings/str_cat.h"

namespace pstrain {
namespace chief {

std::string CheckpointDir(const std::string& model_dir, int64_t step) {
  return absl::StrCat(model_dir, "/ckpt-", step);
}

bool ParseCheckpointName(const std::string& name, int64_t* step) {
  if (name.rfind("ckpt-", 0) != 0 || name.size() == 5 || name.size() > 23) {
    return false;
  }
  for (size_t i = 5; i < name.size(); ++i) {
    if (!std::isdigit(static_cast<unsigned char>(name[i]))) return false;
  }
  *step = std::stoll(name.substr(5));
  return true;
}

std::vector<CheckpointRef> ListCompleteCheckpoints(
    const std::string& model_dir) {
  namespace fs = std::filesystem;
  std::vector<CheckpointRef> found;
  std::error_code error;
  for (const fs::directory_entry& entry :
       fs::directory_iterator(model_dir, error)) {
    int64_t step = 0;
    if (!ParseCheckpointName(entry.path().filename().string(), &step)) continue;
    std::error_code ignored;
    if (!fs::is_regular_file(entry.path() / kCheckpointIndexFile, ignored)) {
      continue;
    }
    found.push_back({step, entry.path().string()});
  }
  std::sort(found.begin(), found.end(),
            [](const CheckpointRef& a, const CheckpointRef& b) {
              return a.step > b.step;
            });
  return found;
}

}  // namespace chief
}  // namespace pstrain
