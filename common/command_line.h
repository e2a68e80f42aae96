// Command-line parsing for pstrain's binaries, in place of
// absl::ParseCommandLine: sets the usage line that `--help` prints first,
// makes `--help` and `--helpshort` list the flags the binary's own main.cc
// defines (not Abseil's or gRPC's; `--helpfull` lists every flag), and makes
// `--version` print "<binary> (pstrain <version>)" (and the git commit of a
// stamped build).
//
//   int main(int argc, char** argv) {
//     pstrain::ParseCommandLine(argc, argv, "chief",
//                               "Runs a training run. Usage: chief ...");
//     ...
//   }
//
// Call once, first in main(): it configures Abseil's process-wide flag usage.
#ifndef PSTRAIN_COMMON_COMMAND_LINE_H_
#define PSTRAIN_COMMON_COMMAND_LINE_H_

#include <string>

#include "absl/strings/string_view.h"

namespace pstrain {

// Whether a flag defined in source file `filename` belongs to `binary`'s
// help: it is defined in "<binary>/main.cc".
bool IsBinaryFlagFile(absl::string_view binary, absl::string_view filename);

// What `binary --version` prints: "<binary> (pstrain <version>)\n", or
// "<binary> (pstrain <version>, commit <commit>)\n" when `commit` (the
// build's, common/version.h) is known.
std::string VersionText(absl::string_view binary, absl::string_view commit);

// Parses argv as absl::ParseCommandLine does, after setting `usage` as the
// program's usage message and `binary`'s help and version. `--help`,
// `--helpshort` and `--version` print and exit there (Abseil exits 1 after a
// help, 0 after the version). An unknown flag, or a value that does not
// parse as its flag's type, exits 2 after Abseil's one line naming the flag
// ("ERROR: Illegal value 'x' specified for flag 'port'"): this library
// replaces Abseil's fatal-usage hook for the whole program, so link it only
// into programs that parse their flags with it.
void ParseCommandLine(int argc, char** argv, absl::string_view binary,
                      absl::string_view usage);

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_COMMAND_LINE_H_
