#include "common/command_line.h"

#include <cstdlib>
#include <string>

#include "absl/base/config.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/version.h"

namespace pstrain {

bool IsBinaryFlagFile(absl::string_view binary, absl::string_view filename) {
  const std::string main_cc = absl::StrCat(binary, "/main.cc");
  return filename == main_cc || absl::EndsWith(filename, "/" + main_cc);
}

std::string VersionText(absl::string_view binary, absl::string_view commit) {
  return absl::StrCat(binary, " (pstrain ", kPstrainVersion,
                      commit.empty() ? "" : ", commit ", commit, ")\n");
}

void ParseCommandLine(int argc, char** argv, absl::string_view binary,
                      absl::string_view usage) {
  absl::SetProgramUsageMessage(usage);
  const std::string name(binary);
  absl::FlagsUsageConfig config;
  const auto own = [name](absl::string_view filename) {
    return IsBinaryFlagFile(name, filename);
  };
  config.contains_help_flags = own;
  config.contains_helpshort_flags = own;
  config.contains_helppackage_flags = own;
  config.version_string = [name] { return VersionText(name, BuildCommit()); };
  absl::SetFlagsUsageConfig(config);
  absl::ParseCommandLine(argc, argv);
}

}  // namespace pstrain

// Abseil's hook, called after it printed "ERROR: <message>" for a flag value
// that does not parse or an unknown flag, before it exits 1: pstrain's
// binaries exit 2 on a bad flag. (It is declared, and defined weak, in
// Abseil's usage_config; this definition replaces that one.)
extern "C" void ABSL_INTERNAL_C_SYMBOL(AbslInternalReportFatalUsageError)(
    absl::string_view) {
  std::exit(2);
}
