// For tests: reads a TensorBoard event file with a reader written from the
// format (not from EventWriter): every record's framing and both masked
// CRC-32Cs are checked with gtest expectations, and the Events parsed.
#pragma once

#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "base/env.h"
#include "gtest/gtest.h"
#include "proto/event.pb.h"
#include "tensor/checkpoint_format.h"

namespace distflow::test {

inline uint64_t LittleEndian(absl::string_view s) {
  uint64_t v = 0;
  for (size_t i = s.size(); i-- > 0;) v = (v << 8) | static_cast<uint8_t>(s[i]);
  return v;
}

inline std::vector<tensorboard::Event> ReadEvents(const std::string& path) {
  auto masked = [](absl::string_view d) {
    uint32_t c = checkpoint::Crc32c(d);
    return ((c >> 15) | (c << 17)) + 0xa282ead8u;
  };
  absl::StatusOr<std::string> contents = Env::Default()->ReadFile(path);
  EXPECT_TRUE(contents.ok()) << contents.status();
  const std::string bytes = contents.ok() ? *contents : std::string();
  absl::string_view rest = bytes;
  std::vector<tensorboard::Event> events;
  while (!rest.empty()) {
    EXPECT_GE(rest.size(), 12u) << "a truncated record header in " << path;
    if (rest.size() < 12) break;
    uint64_t len = LittleEndian(rest.substr(0, 8));
    EXPECT_EQ(LittleEndian(rest.substr(8, 4)), masked(rest.substr(0, 8))) << "length CRC in " << path;
    EXPECT_GE(rest.size(), 16 + len) << "a truncated record in " << path;
    if (rest.size() < 16 + len) break;
    absl::string_view data = rest.substr(12, len);
    EXPECT_EQ(LittleEndian(rest.substr(12 + len, 4)), masked(data)) << "data CRC in " << path;
    tensorboard::Event e;
    EXPECT_TRUE(e.ParseFromArray(data.data(), static_cast<int>(data.size())));
    events.push_back(e);
    rest.remove_prefix(16 + len);
  }
  return events;
}

}  // namespace distflow::test
