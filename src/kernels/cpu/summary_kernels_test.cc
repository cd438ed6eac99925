#include <zlib.h>

#include <cfloat>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "base/status_macros.h"
#include "graph/attr_value.h"
#include "gtest/gtest.h"
#include "kernels/cpu/histogram.h"
#include "kernels/op_test_util.h"
#include "proto/summary.pb.h"
#include "tensor/tensor_testutil.h"

namespace distflow {
namespace {

using tensorboard::Summary;
using test::OpTest;

Tensor Str(const std::string& s) { return Tensor::Scalar<std::string>(s); }

template <typename T>
Tensor V(const std::vector<T>& v, std::initializer_list<int64_t> dims) {
  return Tensor::FromVector<T>(v, TensorShape(dims));
}

// Runs the op and parses its one output.
absl::StatusOr<Summary> RunSummary(OpTest& t) {
  ASSIGN_OR_RETURN(std::vector<Tensor> out, t.Run());
  if (out.size() != 1 || out[0].dims() != 0 || out[0].dtype() != DT_STRING) {
    return absl::InternalError("a summary op must output one scalar string");
  }
  Summary s;
  if (!s.ParseFromString(out[0].flat<std::string>()[0])) return absl::InternalError("not a Summary");
  return s;
}

void ExpectError(const absl::Status& s, const std::string& needle) {
  ASSERT_FALSE(s.ok()) << "expected an error containing '" << needle << "'";
  EXPECT_NE(std::string(s.message()).find(needle), std::string::npos) << s;
}

uint32_t BigEndian32(const std::string& s, size_t at) {
  return (static_cast<uint32_t>(static_cast<uint8_t>(s[at])) << 24) |
         (static_cast<uint32_t>(static_cast<uint8_t>(s[at + 1])) << 16) |
         (static_cast<uint32_t>(static_cast<uint8_t>(s[at + 2])) << 8) | static_cast<uint8_t>(s[at + 3]);
}

// Decodes a PNG written by EncodePng (one IDAT, filter 0 on every row):
// checks the signature and each chunk's CRC, returns the pixels.
std::string DecodePng(const std::string& png, int* width, int* height, int* color_type) {
  EXPECT_EQ(png.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
  std::string idat;
  for (size_t at = 8; at + 12 <= png.size();) {
    uint32_t len = BigEndian32(png, at);
    std::string type = png.substr(at + 4, 4);
    std::string data = png.substr(at + 8, len);
    uLong crc = crc32(0L, reinterpret_cast<const Bytef*>(png.data() + at + 4), len + 4);
    EXPECT_EQ(crc, BigEndian32(png, at + 8 + len)) << type;
    if (type == "IHDR") {
      *width = static_cast<int>(BigEndian32(data, 0));
      *height = static_cast<int>(BigEndian32(data, 4));
      EXPECT_EQ(data[8], 8);
      *color_type = data[9];
    } else if (type == "IDAT") {
      idat += data;
    }
    at += 12 + len;
  }
  std::string raw(1 << 20, '\0');
  uLongf raw_size = raw.size();
  EXPECT_EQ(uncompress(reinterpret_cast<Bytef*>(raw.data()), &raw_size, reinterpret_cast<const Bytef*>(idat.data()),
                       idat.size()),
            Z_OK);
  raw.resize(raw_size);
  std::string pixels;
  size_t row = raw_size / static_cast<size_t>(*height);
  for (int y = 0; y < *height; ++y) {
    EXPECT_EQ(raw[y * row], 0);  // filter: none
    pixels += raw.substr(y * row + 1, row - 1);
  }
  return pixels;
}

TEST(SummaryKernels, ScalarSummaryTagsEachValue) {
  OpTest t("ScalarSummary");
  t.Input(Str("loss")).Input(Tensor::Scalar<float>(0.25f));
  DF_ASSERT_OK_AND_ASSIGN(Summary s, RunSummary(t));
  ASSERT_EQ(s.value_size(), 1);
  EXPECT_EQ(s.value(0).tag(), "loss");
  EXPECT_EQ(s.value(0).simple_value(), 0.25f);

  OpTest t2("ScalarSummary");
  t2.Input(V<std::string>({"a", "b"}, {2})).Input(V<int64_t>({3, -4}, {2}));
  DF_ASSERT_OK_AND_ASSIGN(Summary s2, RunSummary(t2));
  ASSERT_EQ(s2.value_size(), 2);
  EXPECT_EQ(s2.value(1).tag(), "b");
  EXPECT_EQ(s2.value(1).simple_value(), -4.0f);
}

TEST(SummaryKernels, ScalarSummaryRejectsMismatchedShapes) {
  OpTest t("ScalarSummary");
  t.Input(Str("loss")).Input(V<float>({1, 2, 3}, {3}));
  ExpectError(t.Run().status(), "tags and values must have the same shape");
}

TEST(SummaryKernels, HistogramHasTensorFlowsDefaultBuckets) {
  const std::vector<double>& limits = Histogram::DefaultLimits();
  // -DBL_MAX, the negative side, 0, the positive side, DBL_MAX: symmetric.
  ASSERT_EQ(limits.size() % 2, 1u);
  size_t zero = limits.size() / 2;
  EXPECT_EQ(limits[zero], 0.0);
  EXPECT_DOUBLE_EQ(limits[zero + 1], 1e-12);
  EXPECT_DOUBLE_EQ(limits[zero + 2], 1.1e-12);
  EXPECT_EQ(limits.back(), DBL_MAX);
  EXPECT_EQ(limits.front(), -DBL_MAX);
  EXPECT_LT(limits[limits.size() - 2], 1e20);
  EXPECT_GE(limits[limits.size() - 2] * 1.1, 1e20);
  for (size_t i = 0; i < zero; ++i) EXPECT_EQ(limits[i], -limits[limits.size() - 1 - i]);
}

TEST(SummaryKernels, HistogramSummaryCountsEveryValue) {
  OpTest t("HistogramSummary");
  t.Input(Str("w")).Input(V<float>({1.0f, 1.0f, 2.0f, -3.0f, 0.0f}, {5}));
  DF_ASSERT_OK_AND_ASSIGN(Summary s, RunSummary(t));
  ASSERT_EQ(s.value_size(), 1);
  EXPECT_EQ(s.value(0).tag(), "w");
  const tensorboard::HistogramProto& h = s.value(0).histo();
  EXPECT_EQ(h.min(), -3.0);
  EXPECT_EQ(h.max(), 2.0);
  EXPECT_EQ(h.num(), 5.0);
  EXPECT_EQ(h.sum(), 1.0);
  EXPECT_EQ(h.sum_squares(), 15.0);
  ASSERT_EQ(h.bucket_size(), h.bucket_limit_size());
  // Non-empty buckets: each value in the first bucket whose limit exceeds it.
  const std::vector<double>& limits = Histogram::DefaultLimits();
  double total = 0;
  std::vector<std::pair<double, double>> filled;
  for (int i = 0; i < h.bucket_size(); ++i) {
    total += h.bucket(i);
    if (h.bucket(i) > 0) filled.emplace_back(h.bucket_limit(i), h.bucket(i));
    // Every limit is one of the default ones, in order.
    EXPECT_TRUE(std::binary_search(limits.begin(), limits.end(), h.bucket_limit(i))) << h.bucket_limit(i);
    if (i > 0) {
      EXPECT_LT(h.bucket_limit(i - 1), h.bucket_limit(i));
      // No two empty buckets in a row (runs are collapsed).
      EXPECT_FALSE(h.bucket(i) == 0 && h.bucket(i - 1) == 0);
    }
  }
  EXPECT_EQ(total, 5.0);
  ASSERT_EQ(filled.size(), 4u);
  auto upper = [&](double v) { return *std::upper_bound(limits.begin(), limits.end(), v); };
  EXPECT_EQ(filled[0], std::make_pair(upper(-3.0), 1.0));
  EXPECT_EQ(filled[1], std::make_pair(upper(0.0), 1.0));
  EXPECT_EQ(filled[2], std::make_pair(upper(1.0), 2.0));
  EXPECT_EQ(filled[3], std::make_pair(upper(2.0), 1.0));
  EXPECT_GT(upper(1.0), 1.0);
  EXPECT_LE(upper(1.0), 1.1);
  // The last bucket reaches DBL_MAX (a collapsed empty run).
  EXPECT_EQ(h.bucket_limit(h.bucket_limit_size() - 1), DBL_MAX);
}

TEST(SummaryKernels, HistogramSummaryRejectsNaN) {
  OpTest t("HistogramSummary");
  t.Input(Str("w")).Input(V<double>({1.0, NAN}, {2}));
  ExpectError(t.Run().status(), "Nan or Inf in summary histogram for: w");
}

TEST(SummaryKernels, ImageSummaryEncodesUint8AsPng) {
  std::vector<uint8_t> pixels(2 * 3 * 4 * 3);
  for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<uint8_t>(i * 3);
  OpTest t("ImageSummary");
  t.Input(Str("img")).Input(V<uint8_t>(pixels, {2, 3, 4, 3}));
  SetAttrInt(t.def(), "max_images", 1);
  DF_ASSERT_OK_AND_ASSIGN(Summary s, RunSummary(t));
  ASSERT_EQ(s.value_size(), 1);  // max_images
  EXPECT_EQ(s.value(0).tag(), "img/image");
  const Summary::Image& img = s.value(0).image();
  EXPECT_EQ(img.height(), 3);
  EXPECT_EQ(img.width(), 4);
  EXPECT_EQ(img.colorspace(), 3);
  int w = 0, h = 0, color = -1;
  std::string decoded = DecodePng(img.encoded_image_string(), &w, &h, &color);
  EXPECT_EQ(w, 4);
  EXPECT_EQ(h, 3);
  EXPECT_EQ(color, 2);  // RGB
  EXPECT_EQ(decoded, std::string(pixels.begin(), pixels.begin() + 36));
}

TEST(SummaryKernels, ImageSummaryScalesFloatsPerImage) {
  // Image 0 non-negative: scaled by 255 / max. Image 1 has a negative value:
  // by 127 / max|v| around 128. Image 2 has a NaN pixel: bad_color.
  std::vector<float> v = {0.0f, 0.5f, 1.0f, 2.0f, -1.0f, 0.0f, 0.5f, 1.0f, 0.0f, NAN, 1.0f, 1.0f};
  OpTest t("ImageSummary");
  t.Input(Str("f")).Input(V<float>(v, {3, 2, 2, 1}));
  SetAttrIntList(t.def(), "bad_color", {7});
  DF_ASSERT_OK_AND_ASSIGN(Summary s, RunSummary(t));
  ASSERT_EQ(s.value_size(), 3);
  std::vector<std::string> expected = {std::string("\x00\x3f\x7f\xff", 4), std::string("\x01\x80\xbf\xff", 4),
                                       std::string("\x00\x07\xff\xff", 4)};
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(s.value(i).tag(), "f/image/" + std::to_string(i));
    EXPECT_EQ(s.value(i).image().colorspace(), 1);
    int w = 0, h = 0, color = -1;
    EXPECT_EQ(DecodePng(s.value(i).image().encoded_image_string(), &w, &h, &color), expected[i]) << i;
    EXPECT_EQ(color, 0);  // grayscale
  }
}

TEST(SummaryKernels, ImageSummaryRejectsTwoChannels) {
  OpTest t("ImageSummary");
  t.Input(Str("img")).Input(V<float>({0, 0, 0, 0}, {1, 1, 2, 2}));
  ExpectError(t.Run().status(), "1, 3 or 4 channels");
}

TEST(SummaryKernels, TensorSummaryV2CarriesTextAndPlugin) {
  tensorboard::SummaryMetadata meta;
  meta.mutable_plugin_data()->set_plugin_name("text");
  OpTest t("TensorSummaryV2");
  t.Input(Str("notes")).Input(V<std::string>({"hello", "world"}, {2})).Input(Str(meta.SerializeAsString()));
  DF_ASSERT_OK_AND_ASSIGN(Summary s, RunSummary(t));
  ASSERT_EQ(s.value_size(), 1);
  EXPECT_EQ(s.value(0).tag(), "notes");
  EXPECT_EQ(s.value(0).metadata().plugin_data().plugin_name(), "text");
  const tensorboard::TensorProto& tensor = s.value(0).tensor();
  EXPECT_EQ(tensor.dtype(), tensorboard::DT_STRING);
  ASSERT_EQ(tensor.tensor_shape().dim_size(), 1);
  EXPECT_EQ(tensor.tensor_shape().dim(0).size(), 2);
  ASSERT_EQ(tensor.string_val_size(), 2);
  EXPECT_EQ(tensor.string_val(1), "world");
}

TEST(SummaryKernels, ImageSummaryWritesRgbaDoublesUpToMaxImages) {
  // Two 1x2 RGBA images of doubles in [0, 0.5]: scaled by 255 / 0.5.
  std::vector<double> v = {0.0, 0.1, 0.2, 0.5, 0.5, 0.5, 0.5, 0.5, 0, 0, 0, 0, 0, 0, 0, 0};
  OpTest t("ImageSummary");
  t.Input(Str("rgba")).Input(V<double>(v, {2, 1, 2, 4}));
  SetAttrInt(t.def(), "max_images", 5);
  DF_ASSERT_OK_AND_ASSIGN(Summary s, RunSummary(t));
  ASSERT_EQ(s.value_size(), 2);  // the batch is smaller than max_images
  EXPECT_EQ(s.value(1).tag(), "rgba/image/1");
  const Summary::Image& img = s.value(0).image();
  EXPECT_EQ(img.colorspace(), 4);
  int w = 0, h = 0, color = -1;
  EXPECT_EQ(DecodePng(img.encoded_image_string(), &w, &h, &color), std::string("\x00\x33\x66\xff\xff\xff\xff\xff", 8));
  EXPECT_EQ(color, 6);  // RGBA
  EXPECT_EQ(w, 2);
  EXPECT_EQ(h, 1);
  // An all-zero image scales by 0 (no division by zero).
  EXPECT_EQ(DecodePng(s.value(1).image().encoded_image_string(), &w, &h, &color), std::string(8, '\0'));
}

TEST(SummaryKernels, TensorSummaryV2EncodesNumbersAndRejectsBadMetadata) {
  OpTest t("TensorSummaryV2");
  t.Input(Str("v")).Input(V<float>({1.5f, -2.0f}, {1, 2})).Input(Str(""));
  DF_ASSERT_OK_AND_ASSIGN(Summary s, RunSummary(t));
  const tensorboard::TensorProto& tensor = s.value(0).tensor();
  EXPECT_EQ(tensor.dtype(), tensorboard::DT_FLOAT);
  ASSERT_EQ(tensor.tensor_shape().dim_size(), 2);
  EXPECT_EQ(tensor.tensor_shape().dim(1).size(), 2);
  ASSERT_EQ(tensor.tensor_content().size(), 8u);
  float back[2];
  std::memcpy(back, tensor.tensor_content().data(), 8);
  EXPECT_EQ(back[0], 1.5f);
  EXPECT_EQ(back[1], -2.0f);

  OpTest bad("TensorSummaryV2");
  bad.Input(Str("v")).Input(Str("x")).Input(Str("\xff\xff"));
  ExpectError(bad.Run().status(), "serialized_summary_metadata is not a SummaryMetadata");
}

TEST(SummaryKernels, MergeSummaryConcatenatesAndRejectsDuplicates) {
  Summary a, b;
  a.add_value()->set_tag("x");
  a.mutable_value(0)->set_simple_value(1);
  b.add_value()->set_tag("y");
  b.mutable_value(0)->set_simple_value(2);
  OpTest t("MergeSummary");
  t.Input(Str(a.SerializeAsString())).Input(Str(b.SerializeAsString()));
  DF_ASSERT_OK_AND_ASSIGN(Summary s, RunSummary(t));
  ASSERT_EQ(s.value_size(), 2);
  EXPECT_EQ(s.value(0).tag(), "x");
  EXPECT_EQ(s.value(1).simple_value(), 2.0f);

  OpTest dup("MergeSummary");
  dup.Input(Str(a.SerializeAsString())).Input(Str(a.SerializeAsString()));
  ExpectError(dup.Run().status(), "duplicate tag x");

  OpTest bad("MergeSummary");
  bad.Input(Str("\xff\xff"));
  ExpectError(bad.Run().status(), "is not a serialized Summary");
}

}  // namespace
}  // namespace distflow
