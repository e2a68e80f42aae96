#include "chief/history.h"

#include <cmath>
#include <limits>
#include <string>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace pstrain {
namespace chief {
namespace {

TEST(History, CsvHasKerasCsvLoggerColumnsSortedAfterEpoch) {
  History history;
  history.Set(0, "loss", 0.5);
  history.Set(0, "accuracy", 0.75);
  history.Set(0, "val_loss", 0.25);
  history.Set(1, "loss", 0.125);
  history.Set(1, "accuracy", 1);
  history.Set(1, "val_loss", 0.0625);
  EXPECT_EQ(history.ToCsv(),
            "epoch,accuracy,loss,val_loss\n"
            "0,0.75,0.5,0.25\n"
            "1,1,0.125,0.0625\n");
}

TEST(History, MissingValueIsNaAndNonFiniteAsPythonWritesIt) {
  History history;
  history.Set(0, "loss", std::numeric_limits<double>::quiet_NaN());
  history.Set(1, "loss", std::numeric_limits<double>::infinity());
  history.Set(1, "val_loss", 0.5);
  EXPECT_EQ(history.ToCsv(),
            "epoch,loss,val_loss\n"
            "0,nan,NA\n"
            "1,inf,0.5\n");
  const nlohmann::json json = nlohmann::json::parse(history.ToJson());
  EXPECT_TRUE(json["loss"][0].is_null());
  EXPECT_TRUE(json["loss"][1].is_null());
  EXPECT_TRUE(json["val_loss"][0].is_null());
  EXPECT_EQ(json["val_loss"][1], 0.5);
}

TEST(History, ValuesReadBackExactly) {
  History history;
  const double loss = 0.1 + 0.2;  // 0.30000000000000004
  const double accuracy = 2.0 / 3.0;
  history.Set(0, "loss", loss);
  history.Set(0, "accuracy", accuracy);
  const nlohmann::json json = nlohmann::json::parse(history.ToJson());
  EXPECT_EQ(json["epoch"], nlohmann::json::array({0}));
  EXPECT_EQ(json["loss"][0].get<double>(), loss);
  EXPECT_EQ(json["accuracy"][0].get<double>(), accuracy);
  const std::string csv = history.ToCsv();
  EXPECT_NE(csv.find("0.30000000000000004"), std::string::npos) << csv;
  EXPECT_EQ(std::stod(csv.substr(csv.find('\n') + 3)), accuracy) << csv;
}

TEST(History, SettingAnEpochAgainReplacesItsValue) {
  History history;
  history.Set(2, "loss", 0.5);
  history.Set(1, "loss", 0.75);
  history.Set(2, "loss", 0.25);
  EXPECT_EQ(history.Get(2, "loss"), 0.25);
  EXPECT_EQ(history.Get(3, "loss"), std::nullopt);
  EXPECT_EQ(history.Get(1, "accuracy"), std::nullopt);
  EXPECT_EQ(history.ToCsv(), "epoch,loss\n1,0.75\n2,0.25\n");
}

TEST(History, EmptyHistoryIsAHeaderAndAnEmptyObject) {
  History history;
  EXPECT_TRUE(history.empty());
  EXPECT_EQ(history.ToCsv(), "epoch\n");
  EXPECT_EQ(history.ToJson(), "{\"epoch\": []}");
}

TEST(History, ReadsBackWhatItWroteKeepingEarlierEpochs) {
  History history;
  history.Set(0, "loss", 0.1 + 0.2);
  history.Set(0, "val_loss", std::numeric_limits<double>::infinity());
  history.Set(1, "loss", 0.5);  // val_loss NA
  history.Set(2, "loss", 0.25);
  absl::StatusOr<History> all = History::FromCsv(history.ToCsv(), 100);
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ(all->ToCsv(), history.ToCsv());
  EXPECT_EQ(all->Get(0, "loss"), 0.1 + 0.2);
  EXPECT_EQ(all->Get(1, "val_loss"), std::nullopt);
  absl::StatusOr<History> first = History::FromCsv(history.ToCsv(), 1);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->ToCsv(), "epoch,loss,val_loss\n0,0.30000000000000004,inf\n");
}

TEST(History, BadCsvSaysWhichLine) {
  absl::StatusOr<History> bad =
      History::FromCsv("epoch,loss\n0,0.5\n1,abc\n", 10);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "line 3, loss: \"abc\" is not a number");
  bad = History::FromCsv("epoch,loss\n0\n", 10);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "line 2: 1 cells, not 2");
  bad = History::FromCsv("loss,epoch\n", 10);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("line 1"), std::string::npos);
}

}  // namespace
}  // namespace chief
}  // namespace pstrain
