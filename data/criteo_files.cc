#include "data/criteo_files.h"

#include <dirent.h>
#include <fnmatch.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace pstrain {
namespace data {

std::vector<std::string> DefaultCriteoPatterns(absl::string_view split) {
  return {absl::StrCat(split, "*.tsv"), absl::StrCat(split, "*.tsv.gz")};
}

absl::Status CheckCriteoPatterns(absl::Span<const std::string> patterns,
                                 absl::string_view flag) {
  for (const std::string& pattern : patterns) {
    if (pattern.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", flag, ": an empty pattern"));
    }
    if (pattern.find('/') != std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--", flag, ": '", pattern,
          "' has a '/': patterns name files in --data_dir itself"));
    }
  }
  return absl::OkStatus();
}

bool NaturalLess(absl::string_view a, absl::string_view b) {
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    if (absl::ascii_isdigit(a[i]) && absl::ascii_isdigit(b[j])) {
      // Two runs of digits: by value (leading zeros aside: by length, then
      // by digits), then the longer run (more leading zeros) after.
      size_t a_end = i, b_end = j;
      while (a_end < a.size() && absl::ascii_isdigit(a[a_end])) ++a_end;
      while (b_end < b.size() && absl::ascii_isdigit(b[b_end])) ++b_end;
      size_t a_first = i, b_first = j;
      while (a_first + 1 < a_end && a[a_first] == '0') ++a_first;
      while (b_first + 1 < b_end && b[b_first] == '0') ++b_first;
      const absl::string_view a_digits = a.substr(a_first, a_end - a_first);
      const absl::string_view b_digits = b.substr(b_first, b_end - b_first);
      if (a_digits.size() != b_digits.size()) {
        return a_digits.size() < b_digits.size();
      }
      if (a_digits != b_digits) return a_digits < b_digits;
      if (a_end - i != b_end - j) return a_end - i < b_end - j;
      i = a_end;
      j = b_end;
      continue;
    }
    if (a[i] != b[j]) {
      return static_cast<unsigned char>(a[i]) <
             static_cast<unsigned char>(b[j]);
    }
    ++i;
    ++j;
  }
  return a.size() - i < b.size() - j;
}

absl::StatusOr<std::vector<std::string>> ListCriteoFiles(
    const std::string& dir, absl::Span<const std::string> patterns) {
  DIR* handle = opendir(dir.c_str());
  if (handle == nullptr) {
    return absl::ErrnoToStatus(
        errno, absl::StrCat("cannot read the data directory '", dir, "'"));
  }
  std::vector<std::string> names;
  while (const dirent* entry = readdir(handle)) {
    const std::string name = entry->d_name;
    const bool matches = std::any_of(
        patterns.begin(), patterns.end(), [&name](const std::string& pattern) {
          return fnmatch(pattern.c_str(), name.c_str(), FNM_PERIOD) == 0;
        });
    if (!matches) continue;
    struct stat info;
    const std::string path = absl::StrCat(dir, "/", name);
    if (stat(path.c_str(), &info) != 0 || !S_ISREG(info.st_mode)) continue;
    names.push_back(name);
  }
  closedir(handle);
  if (names.empty()) {
    return absl::NotFoundError(
        absl::StrCat("no file named ", absl::StrJoin(patterns, " or "), " in '",
                     dir, "' (--data_format=criteo)"));
  }
  std::sort(names.begin(), names.end(), NaturalLess);
  std::vector<std::string> paths;
  paths.reserve(names.size());
  for (const std::string& name : names) {
    paths.push_back(absl::StrCat(dir, "/", name));
  }
  return paths;
}

}  // namespace data
}  // namespace pstrain
