#include "tensor/checkpoint_format.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace distflow::checkpoint {
namespace {

using ::testing::HasSubstr;

std::string TwoTensors(proto::CheckpointShardFooter* footer) {
  std::vector<std::pair<std::string, Tensor>> tensors = {
      {"w", Tensor::FromVector<float>({1, 2, 3, 4, 5, 6}, TensorShape({2, 3}))},
      {"global_step", Tensor::Scalar<int64_t>(42)},
  };
  auto contents = EncodeShard(tensors, footer);
  EXPECT_TRUE(contents.ok()) << contents.status();
  return contents.ok() ? *contents : "";
}

TEST(Crc32c, MatchesTheStandardCheckValue) {
  EXPECT_EQ(Crc32c("123456789"), 0xE3069283u);
  EXPECT_EQ(Crc32c(""), 0u);
}

TEST(CheckpointFormat, FileNames) {
  EXPECT_EQ(DataFileName("/l/model.ckpt-5", 1, 3), "/l/model.ckpt-5.data-00001-of-00003");
  EXPECT_EQ(IndexFileName("/l/model.ckpt-5"), "/l/model.ckpt-5.index");
}

TEST(CheckpointFormat, ShardRoundTrip) {
  proto::CheckpointShardFooter footer;
  std::string contents = TwoTensors(&footer);
  ASSERT_EQ(footer.entry_size(), 2);
  auto shard = ParseShard(contents, "f");
  ASSERT_TRUE(shard.ok()) << shard.status();
  auto w = ReadTensor(*shard, shard->footer.entry(0));
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ(w->shape(), TensorShape({2, 3}));
  EXPECT_EQ(w->flat<float>()[5], 6.0f);
  auto step = ReadTensor(*shard, shard->footer.entry(1));
  ASSERT_TRUE(step.ok());
  EXPECT_EQ(step->scalar<int64_t>(), 42);
  EXPECT_EQ(EntryTypeString(shard->footer.entry(0)), "float32[2,3]");
}

TEST(CheckpointFormat, EveryTruncationIsDataLossNamingTheFile) {
  proto::CheckpointShardFooter footer;
  std::string contents = TwoTensors(&footer);
  for (size_t n = 0; n < contents.size(); ++n) {
    auto shard = ParseShard(absl::string_view(contents).substr(0, n), "ckpt.data");
    ASSERT_FALSE(shard.ok()) << "a file cut to " << n << " bytes parsed";
    EXPECT_EQ(shard.status().code(), absl::StatusCode::kDataLoss);
    EXPECT_THAT(std::string(shard.status().message()), HasSubstr("ckpt.data"));
  }
}

TEST(CheckpointFormat, AFlippedBitIsCaught) {
  proto::CheckpointShardFooter footer;
  const std::string contents = TwoTensors(&footer);
  for (size_t i = 0; i < contents.size(); ++i) {
    std::string bad = contents;
    bad[i] = static_cast<char>(bad[i] ^ 0x01);
    auto shard = ParseShard(bad, "f");
    if (!shard.ok()) continue;  // caught by the footer's crc or checks
    bool caught = false;
    for (const auto& e : shard->footer.entry()) caught |= !ReadTensor(*shard, e).ok();
    EXPECT_TRUE(caught) << "a flipped bit at byte " << i << " went unnoticed";
  }
}

TEST(CheckpointFormat, RejectsEntriesThatDoNotFit) {
  proto::CheckpointShardFooter footer;
  TwoTensors(&footer);
  proto::CheckpointIndex index;
  index.set_format_version(kFormatVersion);
  index.set_num_shards(1);
  *index.add_entry() = footer.entry(0);
  index.mutable_entry(0)->set_size(7);  // float32[2,3] needs 24
  auto parsed = ParseIndex(EncodeIndex(index), "idx");
  ASSERT_FALSE(parsed.ok());
  EXPECT_THAT(std::string(parsed.status().message()), HasSubstr("has 7 bytes but float32[2,3] needs 24"));

  // A data file whose footer points past its payload.
  std::string contents = TwoTensors(&footer);
  const std::string payload = contents.substr(0, 32);  // float32[2,3] + int64
  footer.mutable_entry(1)->set_offset(int64_t{1} << 40);
  auto shard = ParseShard(payload + FrameFooter(footer), "data");
  ASSERT_FALSE(shard.ok());
  EXPECT_THAT(std::string(shard.status().message()), HasSubstr("lies outside"));
  footer.mutable_entry(1)->set_offset(0);
  EXPECT_TRUE(ParseShard(payload + FrameFooter(footer), "data").ok());
}

TEST(CheckpointFormat, IndexRoundTripAndChecks) {
  proto::CheckpointIndex index;
  index.set_format_version(kFormatVersion);
  index.set_num_shards(2);
  index.set_global_step(100);
  proto::CheckpointShardFooter footer;
  TwoTensors(&footer);
  for (const auto& e : footer.entry()) *index.add_entry() = e;
  index.mutable_entry(1)->set_shard(1);
  auto parsed = ParseIndex(EncodeIndex(index), "idx");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->global_step(), 100);

  proto::CheckpointIndex bad = index;
  bad.mutable_entry(1)->set_shard(2);
  EXPECT_THAT(std::string(ParseIndex(EncodeIndex(bad), "idx").status().message()), HasSubstr("shard 2 of 2"));
  bad = index;
  bad.mutable_entry(1)->set_name("w");
  EXPECT_THAT(std::string(ParseIndex(EncodeIndex(bad), "idx").status().message()), HasSubstr("appears twice"));
  bad = index;
  bad.set_format_version(7);
  EXPECT_EQ(ParseIndex(EncodeIndex(bad), "idx").status().code(), absl::StatusCode::kFailedPrecondition);
  bad = index;
  bad.mutable_entry(0)->mutable_shape()->add_dim(-4);
  EXPECT_EQ(ParseIndex(EncodeIndex(bad), "idx").status().code(), absl::StatusCode::kDataLoss);
  bad = index;
  bad.mutable_entry(0)->set_dtype(proto::DT_STRING);
  EXPECT_THAT(std::string(ParseIndex(EncodeIndex(bad), "idx").status().message()), HasSubstr("unsupported dtype"));
  // A data file is not an index.
  EXPECT_FALSE(ParseIndex(TwoTensors(&footer), "idx").ok());
}

TEST(CheckpointFormat, StringTensorsAreRefusedByName) {
  proto::CheckpointShardFooter footer;
  std::vector<std::pair<std::string, Tensor>> tensors = {{"vocab", Tensor::Scalar<std::string>("x")}};
  auto contents = EncodeShard(tensors, &footer);
  ASSERT_FALSE(contents.ok());
  EXPECT_THAT(std::string(contents.status().message()), HasSubstr("'vocab'"));
}

}  // namespace
}  // namespace distflow::checkpoint
