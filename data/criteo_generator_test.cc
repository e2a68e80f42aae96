// bench/criteo_gen.py's output, read back with the C++ reader: the files are
// well-formed Criteo lines, the generator's Bayes-optimal AUC and log loss
// agree with the ones computed here from its probabilities and the labels
// the reader sees, the data set has the promised shape, and the seed fixes
// every byte.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "data/criteo_files.h"
#include "data/criteo_hash.h"
#include "data/criteo_line.h"
#include "data/criteo_reader.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace pstrain {
namespace data {
namespace {

std::string TempDir(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return absl::StrCat(dir != nullptr ? dir : "/tmp", "/", name);
}

std::string ReadWhole(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Runs the generator into `dir` with `args`; false (with the log in the
// failure message) if it fails.
void Generate(const std::string& dir, const std::string& args) {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  const char* workspace = std::getenv("TEST_WORKSPACE");
  ASSERT_NE(srcdir, nullptr);
  const std::string script =
      absl::StrCat(srcdir, "/", workspace != nullptr ? workspace : "pstrain",
                   "/bench/criteo_gen.py");
  const std::string log = dir + ".log";
  // Debian's python3, which has numpy (python3-numpy).
  const std::string command =
      absl::StrCat("/usr/bin/python3 ", script, " --out_dir ", dir, " ", args,
                   " > ", log, " 2>&1");
  ASSERT_EQ(std::system(command.c_str()), 0) << command << "\n"
                                             << ReadWhole(log);
}

struct Read {
  std::vector<float> labels;
  std::vector<std::vector<uint64_t>> ids;  // [field][row]
};

Read ReadSplit(const std::string& dir, const std::string& split) {
  Read read;
  read.ids.resize(kCriteoSparse);
  absl::StatusOr<std::vector<std::string>> files =
      ListCriteoFiles(dir, DefaultCriteoPatterns(split));
  EXPECT_TRUE(files.ok()) << files.status();
  if (!files.ok()) return read;
  CriteoReaderOptions options;
  options.batch_size = 1000;
  absl::StatusOr<std::unique_ptr<CriteoReader>> reader =
      CriteoReader::Open(*files, options);
  EXPECT_TRUE(reader.ok()) << reader.status();
  if (!reader.ok()) return read;
  CriteoBatch batch;
  for (;;) {
    absl::StatusOr<bool> more = (*reader)->Next(&batch);
    EXPECT_TRUE(more.ok()) << more.status();
    if (!more.ok() || !*more) break;
    read.labels.insert(read.labels.end(), batch.labels.begin(),
                       batch.labels.end());
    for (int64_t row = 0; row < batch.size(); ++row) {
      for (int k = 0; k < kCriteoSparse; ++k) {
        read.ids[k].push_back(batch.sparse[row * kCriteoSparse + k]);
      }
    }
  }
  return read;
}

nlohmann::json ReadJson(const std::string& path) {
  const std::string text = ReadWhole(path);
  nlohmann::json json = nlohmann::json::parse(text, nullptr, false);
  EXPECT_FALSE(json.is_discarded()) << path << ": " << text;
  return json;
}

std::vector<double> ReadProbabilities(const std::string& path) {
  std::ifstream in(path);
  std::vector<double> p;
  double value;
  while (in >> value) p.push_back(value);
  return p;
}

// AUC with ties counted half, by sorting (independent of the generator's
// rank-sum formula).
double Auc(const std::vector<double>& p, const std::vector<float>& y) {
  std::vector<std::pair<double, float>> rows;
  for (size_t i = 0; i < p.size(); ++i) rows.emplace_back(p[i], y[i]);
  std::sort(rows.begin(), rows.end());
  double negatives_below = 0, positives = 0, negatives = 0, pairs = 0;
  for (size_t i = 0; i < rows.size();) {
    size_t j = i;
    double pos = 0, neg = 0;
    for (; j < rows.size() && rows[j].first == rows[i].first; ++j) {
      (rows[j].second > 0.5f ? pos : neg) += 1;
    }
    pairs += pos * (negatives_below + neg / 2);
    negatives_below += neg;
    positives += pos;
    negatives += neg;
    i = j;
  }
  return pairs / (positives * negatives);
}

TEST(CriteoGenerator, WritesReadableFilesWithTheirBayesOptimalFigures) {
  const std::string dir = TempDir("gen_a");
  Generate(dir,
           "--train_rows 4000 --test_rows 1500 --train_files 2 --scale 0.001 "
           "--seed 7 --probabilities");
  for (const std::string file :
       {"train-00000.tsv", "train-00001.tsv", "test.tsv"}) {
    const std::string path = dir + "/" + file;
    const nlohmann::json bayes = ReadJson(path + ".bayes.json");
    const std::vector<double> p = ReadProbabilities(path + ".probabilities");
    CriteoReaderOptions options;
    options.batch_size = 4096;
    absl::StatusOr<std::unique_ptr<CriteoReader>> reader =
        CriteoReader::Open({path}, options);
    ASSERT_TRUE(reader.ok()) << reader.status();
    CriteoBatch batch;
    std::vector<float> labels;
    for (;;) {
      absl::StatusOr<bool> more = (*reader)->Next(&batch);
      ASSERT_TRUE(more.ok()) << more.status();
      if (!*more) break;
      labels.insert(labels.end(), batch.labels.begin(), batch.labels.end());
    }
    const int64_t rows = file == "test.tsv" ? 1500 : 2000;
    ASSERT_EQ(static_cast<int64_t>(labels.size()), rows) << file;
    ASSERT_EQ(p.size(), labels.size()) << file;
    double positives = 0, log_loss = 0;
    for (size_t i = 0; i < p.size(); ++i) {
      positives += labels[i];
      log_loss -= labels[i] > 0.5f ? std::log(p[i]) : std::log(1 - p[i]);
    }
    log_loss /= p.size();
    EXPECT_EQ(bayes["rows"], rows) << file;
    EXPECT_EQ(bayes["positives"], positives) << file;
    EXPECT_NEAR(positives / rows, 0.25, 0.04) << file;
    EXPECT_NEAR(bayes["bayes_auc"].get<double>(), Auc(p, labels), 1e-9) << file;
    EXPECT_NEAR(bayes["bayes_log_loss"].get<double>(), log_loss, 1e-9) << file;
    // A model that knows the truth does far better than chance.
    EXPECT_GT(bayes["bayes_auc"].get<double>(), 0.75) << file;
  }
}

TEST(CriteoGenerator, FieldsHaveTheScaledCardinalitiesAndZipfFrequencies) {
  const std::string dir = TempDir("gen_shape");
  Generate(dir, "--train_rows 6000 --test_rows 10 --scale 0.001 --seed 5");
  const nlohmann::json bayes = ReadJson(dir + "/train.tsv.bayes.json");
  const Read read = ReadSplit(dir, "train");
  ASSERT_EQ(read.labels.size(), 6000u);
  const std::vector<int> kaggle = {
      1460,  583,  10131227, 2202608, 305, 24,     12517,   633,   3,
      93145, 5683, 8351593,  3194,    27,  14992,  5461306, 10,    5652,
      2173,  4,    7046547,  18,      15,  286181, 105,     142572};
  for (int k = 1; k <= kCriteoSparse; ++k) {
    const int cardinality = bayes["cardinalities"][k - 1].get<int>();
    EXPECT_EQ(cardinality,
              std::max(std::min(kaggle[k - 1], 10),
                       static_cast<int>(std::lround(kaggle[k - 1] * 0.001))))
        << "C" << k;
    std::map<uint64_t, int> counts;
    int missing = 0;
    for (const uint64_t id : read.ids[k - 1]) {
      if (id == CriteoMissingId(k)) {
        ++missing;
      } else {
        ++counts[id];
      }
    }
    EXPECT_LE(static_cast<int>(counts.size()), cardinality) << "C" << k;
    int top = 0;
    for (const auto& [id, count] : counts) top = std::max(top, count);
    // Zipf-like: the most frequent value is far above a uniform share.
    if (cardinality >= 100) {
      EXPECT_GT(top, 10 * 6000 / cardinality) << "C" << k;
    }
    // C22 is mostly missing in the real set, C1 never.
    if (k == 22) {
      EXPECT_GT(missing, 6000 / 2) << "C22";
    }
    if (k == 1) {
      EXPECT_EQ(missing, 0) << "C1";
    }
  }
  // Small fields take all their values.
  std::unordered_set<uint64_t> c9(read.ids[8].begin(), read.ids[8].end());
  EXPECT_EQ(c9.size(), 3u);
}

TEST(CriteoGenerator, TheSeedFixesEveryByteAndGzipReadsAlike) {
  const std::string args = "--train_rows 3000 --test_rows 100 --scale 0.001";
  Generate(TempDir("gen_s1"), args + " --seed 11");
  Generate(TempDir("gen_s1_again"), args + " --seed 11");
  Generate(TempDir("gen_s1_gz"), args + " --seed 11 --gzip");
  Generate(TempDir("gen_s2"), args + " --seed 12");
  const std::string first = ReadWhole(TempDir("gen_s1") + "/train.tsv");
  ASSERT_FALSE(first.empty());
  EXPECT_EQ(first, ReadWhole(TempDir("gen_s1_again") + "/train.tsv"));
  EXPECT_NE(first, ReadWhole(TempDir("gen_s2") + "/train.tsv"));
  const Read plain = ReadSplit(TempDir("gen_s1"), "train");
  const Read gz = ReadSplit(TempDir("gen_s1_gz"), "train");
  ASSERT_EQ(plain.labels.size(), 3000u);
  EXPECT_EQ(plain.labels, gz.labels);
  EXPECT_EQ(plain.ids, gz.ids);
}

}  // namespace
}  // namespace data
}  // namespace pstrain
