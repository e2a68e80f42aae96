#include "data/criteo_files.h"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace pstrain {
namespace data {

absl::StatusOr<std::vector<std::string>> ListCriteoFiles(
    const std::string& dir, absl::string_view prefix) {
  DIR* handle = opendir(dir.c_str());
  if (handle == nullptr) {
    return absl::ErrnoToStatus(
        errno, absl::StrCat("cannot read the data directory '", dir, "'"));
  }
  std::vector<std::string> names;
  while (const dirent* entry = readdir(handle)) {
    const absl::string_view name = entry->d_name;
    if (!absl::StartsWith(name, prefix)) continue;
    if (!absl::EndsWith(name, ".tsv") && !absl::EndsWith(name, ".tsv.gz")) {
      continue;
    }
    struct stat info;
    const std::string path = absl::StrCat(dir, "/", name);
    if (stat(path.c_str(), &info) != 0 || !S_ISREG(info.st_mode)) continue;
    names.emplace_back(name);
  }
  closedir(handle);
  if (names.empty()) {
    return absl::NotFoundError(absl::StrCat("no ", prefix, "*.tsv or ", prefix,
                                            "*.tsv.gz file in '", dir,
                                            "' (--data_format=criteo)"));
  }
  std::sort(names.begin(), names.end());
  std::vector<std::string> paths;
  paths.reserve(names.size());
  for (const std::string& name : names) {
    paths.push_back(absl::StrCat(dir, "/", name));
  }
  return paths;
}

}  // namespace data
}  // namespace pstrain
