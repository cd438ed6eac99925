#include "data/record_io.h"

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tensor/checkpoint_format.h"

namespace distflow::record_io {
namespace {

using ::testing::HasSubstr;

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return absl::StrCat(dir ? dir : "/tmp", "/record_io_test_", getpid(), "_", name);
}

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void Spit(const std::string& path, const std::string& bytes) { std::ofstream(path, std::ios::binary) << bytes; }

std::vector<std::string> Records() {
  return {"", "a", std::string(1000, 'x'), std::string("\0\1\2\xff", 4), std::string(300000, 'q')};
}

std::vector<std::string> ReadAll(const std::string& path, Compression c, absl::Status* end) {
  std::vector<std::string> got;
  auto reader = RecordReader::Open(path, c);
  if (!reader.ok()) {
    *end = reader.status();
    return got;
  }
  std::string r;
  while ((*end = (*reader)->ReadRecord(&r)).ok()) got.push_back(r);
  return got;
}

TEST(RecordIo, MaskedCrcIsTensorFlows) {
  uint32_t c = checkpoint::Crc32c("abc");
  EXPECT_EQ(MaskedCrc32c("abc"), ((c >> 15) | (c << 17)) + 0xa282ead8u);
  // A record of "hello" as TensorFlow's TFRecordWriter writes it.
  const std::string framed = EncodeRecord("hello");
  ASSERT_EQ(framed.size(), 12u + 5 + 4);
  EXPECT_EQ(framed.substr(0, 8), std::string("\x05\0\0\0\0\0\0\0", 8));
  EXPECT_EQ(framed.substr(12, 5), "hello");
}

TEST(RecordIo, RoundTripsEveryCompression) {
  for (Compression c : {Compression::kNone, Compression::kZlib, Compression::kGzip}) {
    const std::string path = TempPath("roundtrip");
    {
      auto w = RecordWriter::Open(path, c);
      ASSERT_TRUE(w.ok()) << w.status();
      for (const auto& r : Records()) ASSERT_TRUE((*w)->Write(r).ok());
      ASSERT_TRUE((*w)->Close().ok());
      EXPECT_FALSE((*w)->Write("late").ok());
    }
    absl::Status end;
    EXPECT_EQ(ReadAll(path, c, &end), Records()) << static_cast<int>(c);
    EXPECT_TRUE(absl::IsOutOfRange(end)) << end;
    if (c == Compression::kNone) {
      std::string expected;
      for (const auto& r : Records()) expected += EncodeRecord(r);
      EXPECT_EQ(Slurp(path), expected);
    } else {
      EXPECT_LT(Slurp(path).size(), 300000u);                        // compressed
      EXPECT_EQ(Slurp(path)[0] == '\x1f', c == Compression::kGzip);  // gzip's magic
    }
    std::remove(path.c_str());
  }
}

TEST(RecordIo, EmptyFileHasNoRecords) {
  const std::string path = TempPath("empty");
  Spit(path, "");
  for (Compression c : {Compression::kNone, Compression::kGzip}) {
    absl::Status end;
    EXPECT_TRUE(ReadAll(path, c, &end).empty());
    EXPECT_TRUE(absl::IsOutOfRange(end)) << end;
  }
  std::remove(path.c_str());
}

TEST(RecordIo, DataCrcMismatchNamesFileAndOffset) {
  const std::string path = TempPath("baddata");
  std::string bytes = EncodeRecord("first") + EncodeRecord("second");
  const size_t second = EncodeRecord("first").size();
  bytes[second + 12 + 2] ^= 0x20;  // a bit of "second"'s data
  Spit(path, bytes);
  absl::Status end;
  auto got = ReadAll(path, Compression::kNone, &end);
  EXPECT_EQ(got, std::vector<std::string>{"first"});
  EXPECT_TRUE(absl::IsDataLoss(end)) << end;
  EXPECT_THAT(std::string(end.message()), HasSubstr(path));
  EXPECT_THAT(std::string(end.message()), HasSubstr(absl::StrCat("byte offset ", second)));
  EXPECT_THAT(std::string(end.message()), HasSubstr("crc32c of its 6 data bytes"));
  std::remove(path.c_str());
}

TEST(RecordIo, LengthCrcMismatchIsCorruption) {
  const std::string path = TempPath("badlen");
  std::string bytes = EncodeRecord("abc");
  bytes[0] = 9;  // the length no longer matches its crc
  Spit(path, bytes);
  absl::Status end;
  EXPECT_TRUE(ReadAll(path, Compression::kNone, &end).empty());
  EXPECT_TRUE(absl::IsDataLoss(end));
  EXPECT_THAT(std::string(end.message()), HasSubstr("crc32c of its length"));
  EXPECT_THAT(std::string(end.message()), HasSubstr("byte offset 0"));
  std::remove(path.c_str());
}

TEST(RecordIo, TruncationIsDataLossNotEnd) {
  const std::string path = TempPath("trunc");
  const std::string one = EncodeRecord("0123456789");
  for (size_t cut : {size_t{5}, size_t{12}, size_t{20}, one.size() - 1}) {
    Spit(path, one + one.substr(0, cut));
    absl::Status end;
    auto got = ReadAll(path, Compression::kNone, &end);
    EXPECT_EQ(got.size(), 1u);
    EXPECT_TRUE(absl::IsDataLoss(end)) << cut << " " << end;
    EXPECT_THAT(std::string(end.message()), HasSubstr("Truncated record"));
    EXPECT_THAT(std::string(end.message()), HasSubstr(absl::StrCat("byte offset ", one.size())));
  }
  std::remove(path.c_str());
}

TEST(RecordIo, DamagedCompressedStreamIsAnError) {
  const std::string path = TempPath("gz");
  {
    auto w = RecordWriter::Open(path, Compression::kGzip);
    ASSERT_TRUE(w.ok());
    for (int i = 0; i < 100; ++i) ASSERT_TRUE((*w)->Write(absl::StrCat("record ", i)).ok());
  }
  std::string bytes = Slurp(path);
  Spit(path, bytes.substr(0, bytes.size() / 2));
  absl::Status end;
  ReadAll(path, Compression::kGzip, &end);
  EXPECT_TRUE(absl::IsDataLoss(end)) << end;
  EXPECT_THAT(std::string(end.message()), HasSubstr(path));
  // Reading a gzip file as uncompressed fails on the first record's crc.
  Spit(path, bytes);
  ReadAll(path, Compression::kNone, &end);
  EXPECT_TRUE(absl::IsDataLoss(end)) << end;
  std::remove(path.c_str());
}

TEST(RecordIo, MissingFileAndBadCompressionName) {
  absl::Status end;
  ReadAll(TempPath("nope"), Compression::kNone, &end);
  EXPECT_TRUE(absl::IsNotFound(end));
  EXPECT_THAT(std::string(end.message()), HasSubstr("nope"));
  EXPECT_EQ(*ParseCompression("GZIP"), Compression::kGzip);
  EXPECT_EQ(*ParseCompression(""), Compression::kNone);
  EXPECT_THAT(std::string(ParseCompression("gz").status().message()), HasSubstr("'gz'"));
}

}  // namespace
}  // namespace distflow::record_io
