#include "chief/event_writer.h"

#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "chief/event_test_util.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace chief {
namespace {

using testing::ListDir;
using testing::ReadEvents;

TEST(EventWriter, CreatesTheDirectoryAndAFileTensorBoardLooksFor) {
  const std::string dir = std::string(getenv("TEST_TMPDIR")) + "/run/train";
  absl::StatusOr<std::unique_ptr<EventWriter>> writer =
      EventWriter::Create(dir);
  ASSERT_TRUE(writer.ok()) << writer.status();
  const std::vector<std::string> names = ListDir(dir);
  ASSERT_EQ(names.size(), 1u);
  EXPECT_TRUE(absl::StartsWith(names[0], "events.out.tfevents."));
  EXPECT_EQ((*writer)->path(), dir + "/" + names[0]);
  // Only the version record so far.
  const std::vector<tensorboard::Event> events = ReadEvents((*writer)->path());
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].file_version(), kEventFileVersion);
  EXPECT_GT(events[0].wall_time(), 1.6e9);  // seconds since 1970, not ms
}

TEST(EventWriter, ScalarsAreFloatTensorsOfTheScalarsPlugin) {
  const std::string dir = std::string(getenv("TEST_TMPDIR")) + "/scalars";
  absl::StatusOr<std::unique_ptr<EventWriter>> writer =
      EventWriter::Create(dir);
  ASSERT_TRUE(writer.ok()) << writer.status();
  ASSERT_TRUE((*writer)
                  ->WriteScalars(
                      100, {{"batch_loss", 0.52}, {"batch_accuracy", 0.8125}})
                  .ok());
  ASSERT_TRUE((*writer)->WriteScalars(200, {{"batch_loss", 0.25}}).ok());
  const std::vector<tensorboard::Event> events = ReadEvents((*writer)->path());
  ASSERT_EQ(events.size(), 3u);
  const tensorboard::Event& first = events[1];
  EXPECT_EQ(first.step(), 100);
  ASSERT_EQ(first.summary().value_size(), 2);
  const tensorboard::Summary::Value& loss = first.summary().value(0);
  EXPECT_EQ(loss.tag(), "batch_loss");
  EXPECT_EQ(loss.metadata().plugin_data().plugin_name(), "scalars");
  EXPECT_EQ(loss.metadata().data_class(), tensorboard::DATA_CLASS_SCALAR);
  EXPECT_EQ(loss.tensor().dtype(), tensorboard::DT_FLOAT);
  EXPECT_TRUE(loss.tensor().has_tensor_shape());
  EXPECT_EQ(loss.tensor().tensor_shape().dim_size(), 0);
  ASSERT_EQ(loss.tensor().float_val_size(), 1);
  EXPECT_EQ(loss.tensor().float_val(0), 0.52f);
  EXPECT_EQ(first.summary().value(1).tag(), "batch_accuracy");
  EXPECT_EQ(first.summary().value(1).tensor().float_val(0), 0.8125f);
  EXPECT_EQ(events[2].step(), 200);
  EXPECT_EQ(events[2].summary().value(0).tensor().float_val(0), 0.25f);
  EXPECT_GE(events[2].wall_time(), events[1].wall_time());
}

TEST(EventWriter, TextIsAStringTensorOfTheTextPlugin) {
  const std::string dir = std::string(getenv("TEST_TMPDIR")) + "/text";
  absl::StatusOr<std::unique_ptr<EventWriter>> writer =
      EventWriter::Create(dir);
  ASSERT_TRUE(writer.ok()) << writer.status();
  ASSERT_TRUE((*writer)->WriteText(0, "model_summary", "| a | b |").ok());
  const std::vector<tensorboard::Event> events = ReadEvents((*writer)->path());
  ASSERT_EQ(events.size(), 2u);
  const tensorboard::Summary::Value& text = events[1].summary().value(0);
  EXPECT_EQ(text.tag(), "model_summary");
  EXPECT_EQ(text.metadata().plugin_data().plugin_name(), "text");
  EXPECT_EQ(text.tensor().dtype(), tensorboard::DT_STRING);
  ASSERT_EQ(text.tensor().string_val_size(), 1);
  EXPECT_EQ(text.tensor().string_val(0), "| a | b |");
}

TEST(EventWriter, TwoWritersOfOneDirectoryWriteTwoFiles) {
  const std::string dir = std::string(getenv("TEST_TMPDIR")) + "/two";
  absl::StatusOr<std::unique_ptr<EventWriter>> a = EventWriter::Create(dir);
  absl::StatusOr<std::unique_ptr<EventWriter>> b = EventWriter::Create(dir);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_NE((*a)->path(), (*b)->path());
  EXPECT_EQ(ListDir(dir).size(), 2u);
}

TEST(EventWriter, UnwritableDirectoryIsAnErrorNamingIt) {
  const std::string file = std::string(getenv("TEST_TMPDIR")) + "/a_file";
  std::ofstream(file) << "x";
  absl::StatusOr<std::unique_ptr<EventWriter>> writer =
      EventWriter::Create(file + "/train");
  ASSERT_FALSE(writer.ok());
  EXPECT_NE(writer.status().message().find(file), std::string::npos)
      << writer.status();
}

}  // namespace
}  // namespace chief
}  // namespace pstrain
