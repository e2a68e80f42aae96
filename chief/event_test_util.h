// Test helpers: event files read back with our own proto (the chief's
// writer tests; tests/tensorboard_test.cc reads them with an independent
// reader instead), checking each record's framing.
#ifndef PSTRAIN_CHIEF_EVENT_TEST_UTIL_H_
#define PSTRAIN_CHIEF_EVENT_TEST_UTIL_H_

#include <dirent.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "chief/tfrecord_writer.h"
#include "gtest/gtest.h"
#include "proto/tensorboard.pb.h"

namespace pstrain {
namespace chief {
namespace testing {

inline std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

inline uint64_t ReadLittleEndian(const std::string& bytes, size_t at,
                                 int size) {
  uint64_t value = 0;
  for (int i = size - 1; i >= 0; --i) {
    value = (value << 8) | static_cast<uint8_t>(bytes[at + i]);
  }
  return value;
}

// The events of the file at `path`; a bad frame or CRC fails the test.
inline std::vector<tensorboard::Event> ReadEvents(const std::string& path) {
  const std::string bytes = Slurp(path);
  std::vector<tensorboard::Event> events;
  size_t at = 0;
  while (at < bytes.size()) {
    EXPECT_LE(at + 12, bytes.size()) << path;
    if (at + 12 > bytes.size()) break;
    const uint64_t length = ReadLittleEndian(bytes, at, 8);
    EXPECT_EQ(ReadLittleEndian(bytes, at + 8, 4),
              MaskedCrc32c(bytes.data() + at, 8));
    EXPECT_LE(at + 16 + length, bytes.size()) << path;
    if (at + 16 + length > bytes.size()) break;
    const std::string data = bytes.substr(at + 12, length);
    EXPECT_EQ(ReadLittleEndian(bytes, at + 12 + length, 4),
              MaskedCrc32c(data.data(), data.size()));
    tensorboard::Event event;
    EXPECT_TRUE(event.ParseFromString(data)) << path;
    events.push_back(event);
    at += 16 + length;
  }
  return events;
}

// The names in `dir`, sorted, without "." and "..".
inline std::vector<std::string> ListDir(const std::string& dir) {
  std::vector<std::string> names;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* entry = readdir(d)) {
      if (entry->d_name[0] != '.') names.push_back(entry->d_name);
    }
    closedir(d);
  }
  std::sort(names.begin(), names.end());
  return names;
}

// Every scalar of `events` under `tag`, as (step, value).
inline std::vector<std::pair<int64_t, float>> Scalars(
    const std::vector<tensorboard::Event>& events, const std::string& tag) {
  std::vector<std::pair<int64_t, float>> found;
  for (const tensorboard::Event& event : events) {
    for (const tensorboard::Summary::Value& value : event.summary().value()) {
      if (value.tag() == tag && value.tensor().float_val_size() == 1) {
        found.emplace_back(event.step(), value.tensor().float_val(0));
      }
    }
  }
  return found;
}

}  // namespace testing
}  // namespace chief
}  // namespace pstrain

#endif  // PSTRAIN_CHIEF_EVENT_TEST_UTIL_H_
