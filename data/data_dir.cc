#include "data/data_dir.h"

#include <sys/stat.h>

#include "data/csv_reader.h"
#include "data/idx_reader.h"

namespace pstrain {
namespace data {
namespace {

bool IsFile(const std::string& path) {
  struct stat info;
  return stat(path.c_str(), &info) == 0 && S_ISREG(info.st_mode);
}

}  // namespace

absl::StatusOr<Dataset> ReadDataDir(const std::string& dir, Split split) {
  const bool train = split == Split::kTrain;
  if (IsFile(dir + "/train.csv")) {
    CsvOptions options;
    options.header = CsvHeader::kDetect;
    return ReadCsv(dir + (train ? "/train.csv" : "/test.csv"), options);
  }
  const std::string prefix = dir + (train ? "/train" : "/t10k");
  return ReadIdx(prefix + "-images-idx3-ubyte.gz",
                 prefix + "-labels-idx1-ubyte.gz");
}

}  // namespace data
}  // namespace pstrain
