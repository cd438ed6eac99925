#include "distflow/data/mnist.h"

#include "base/env.h"
#include "gtest/gtest.h"

namespace distflow {
namespace data {
namespace {

std::string Header(uint32_t magic, std::vector<uint32_t> dims) {
  std::string s;
  auto put = [&](uint32_t v) {
    for (int k = 3; k >= 0; --k) s.push_back(static_cast<char>((v >> (8 * k)) & 0xff));
  };
  put(magic);
  for (uint32_t d : dims) put(d);
  return s;
}

TEST(Mnist, ParsesImagesIntoUnitRange) {
  std::string b = Header(0x803, {2, 2, 2}) + std::string("\x00\xff\x80\x01\x02\x03\x04\x05", 8);
  auto t = ParseIdxImages(b, "x");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->shape(), TensorShape({2, 4}));
  EXPECT_FLOAT_EQ(t->flat<float>()[1], 1.f);
  EXPECT_FLOAT_EQ(t->flat<float>()[2], 128.f / 255.f);
}

TEST(Mnist, RejectsCorruptFilesNamingThem) {
  auto truncated = ParseIdxImages(Header(0x803, {2, 2, 2}) + "abc", "train-images");
  ASSERT_FALSE(truncated.ok());
  EXPECT_NE(truncated.status().message().find("'train-images' should hold 2 images"), std::string::npos);
  auto magic = ParseIdxLabels(Header(0x803, {1}) + "x", "labels");
  EXPECT_NE(magic.status().message().find("not an IDX label file"), std::string::npos);
  auto range = ParseIdxLabels(Header(0x801, {2}) + std::string("\x01\x0c", 2), "labels");
  EXPECT_NE(range.status().message().find("label 1 is 12"), std::string::npos) << range.status();
  auto huge = ParseIdxImages(Header(0x803, {0xffffffffu, 28, 28}), "big");
  EXPECT_FALSE(huge.ok());
  EXPECT_FALSE(ParseIdxImages("", "empty").ok());
}

TEST(Mnist, MissingDirectoryNamesFile) {
  auto d = ReadDataSets("/nonexistent/mnist");
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(d.status().message().find("/nonexistent/mnist/train-images-idx3-ubyte"), std::string::npos);
}

TEST(Mnist, ReadsDebianFashionMnist) {
  auto d = ReadDataSets(kDefaultFashionMnistDir, 5000, 1);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->train.num_examples(), 55000);
  EXPECT_EQ(d->validation.num_examples(), 5000);
  EXPECT_EQ(d->test.num_examples(), 10000);
  EXPECT_EQ(d->test.images().dim_size(1), 784);
  // Every class appears in the test set, 1000 times each.
  std::vector<int> counts(10);
  for (int32_t l : d->test.labels().flat<int32_t>()) counts[static_cast<size_t>(l)]++;
  for (int c : counts) EXPECT_EQ(c, 1000);
}

TEST(Mnist, ShardsPartitionTheTrainingSetAsDatasetShardDoes) {
  auto whole = ReadDataSets(kDefaultFashionMnistDir, 5000, 1);
  ASSERT_TRUE(whole.ok()) << whole.status();
  const Tensor& wx = whole->train.images();
  const Tensor& wy = whole->train.labels();
  int64_t seen = 0;
  for (int k = 0; k < 3; ++k) {
    ShardOptions o;
    o.num_shards = 3;
    o.shard_index = k;
    o.validation = false;
    o.test = k == 0;  // the chief's evaluation set
    auto shard = ReadDataSetShard(kDefaultFashionMnistDir, o);
    ASSERT_TRUE(shard.ok()) << shard.status();
    const int64_t n = shard->train.num_examples();
    EXPECT_EQ(n, (55000 - k + 2) / 3) << "shard " << k;
    EXPECT_EQ(shard->validation.num_examples(), 0);
    EXPECT_EQ(shard->test.num_examples(), k == 0 ? 10000 : 0);
    // Example i of the shard is example k + 3 i of the whole training split.
    for (int64_t i : {int64_t{0}, n / 2, n - 1}) {
      const int64_t j = k + 3 * i;
      EXPECT_EQ(shard->train.labels().flat<int32_t>()[static_cast<size_t>(i)],
                wy.flat<int32_t>()[static_cast<size_t>(j)]);
      for (int64_t p = 0; p < 784; p += 97) {
        EXPECT_EQ(shard->train.images().flat<float>()[static_cast<size_t>(i * 784 + p)],
                  wx.flat<float>()[static_cast<size_t>(j * 784 + p)]);
      }
    }
    seen += n;
  }
  EXPECT_EQ(seen, 55000) << "the shards together are the training split, each example once";
}

TEST(Mnist, RejectsAShardOutsideTheShardCount) {
  ShardOptions o;
  o.num_shards = 4;
  o.shard_index = 4;
  auto d = ReadDataSetShard(kDefaultFashionMnistDir, o);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(d.status().message().find("shard 4 of 4"), std::string::npos) << d.status();
  o.num_shards = 0;
  o.shard_index = 0;
  EXPECT_FALSE(ReadDataSetShard(kDefaultFashionMnistDir, o).ok());
}

TEST(Mnist, NextBatchCoversAnEpochThenReshuffles) {
  Tensor images(DT_FLOAT, TensorShape({10, 1}));
  Tensor labels(DT_INT32, TensorShape({10}));
  for (int i = 0; i < 10; ++i) {
    images.flat<float>()[static_cast<size_t>(i)] = static_cast<float>(i);
    labels.flat<int32_t>()[static_cast<size_t>(i)] = i;
  }
  DataSet ds(images, labels, 3);
  std::vector<int> seen(10);
  for (int b = 0; b < 5; ++b) {
    auto [x, y] = ds.NextBatch(2);
    for (int k = 0; k < 2; ++k) {
      EXPECT_EQ(static_cast<int>(x.flat<float>()[static_cast<size_t>(k)]), y.flat<int32_t>()[static_cast<size_t>(k)]);
      seen[static_cast<size_t>(y.flat<int32_t>()[static_cast<size_t>(k)])]++;
    }
  }
  for (int c : seen) EXPECT_EQ(c, 1) << "one epoch visits every example once";
  EXPECT_EQ(ds.epochs_completed(), 0);
  ds.NextBatch(1);
  EXPECT_EQ(ds.epochs_completed(), 1);
}

}  // namespace
}  // namespace data
}  // namespace distflow
