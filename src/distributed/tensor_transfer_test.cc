#include "distributed/tensor_transfer.h"

#include "gtest/gtest.h"
#include "tensor/tensor_testutil.h"

namespace distflow {
namespace {

Tensor RoundTrip(const Tensor& t) {
  grpc::ByteBuffer b = EncodeTensorToByteBuffer(t);
  absl::StatusOr<Tensor> back = DecodeTensorFromByteBuffer(b);
  EXPECT_TRUE(back.ok()) << back.status();
  return back.ok() ? *back : Tensor();
}

TEST(TensorTransfer, RoundTripsEveryDtype) {
  std::vector<Tensor> cases = {
      Tensor::FromVector<float>({1, 2, 3, 4}, TensorShape({2, 2})), Tensor::FromVector<double>({1e-300}),
      Tensor::FromVector<int32_t>({-5}), Tensor::FromVector<int64_t>({1, 2, 3}), Tensor::FromVector<uint8_t>({255}),
      Tensor::FromVector<bool>({true, false}), Tensor::FromVector<std::string>({"a", std::string("\0b", 2)}),
      Tensor(DT_FLOAT, TensorShape({0, 3})), Tensor::Scalar<float>(2.5f)};
  for (const Tensor& t : cases) EXPECT_TENSOR_EQ(t, RoundTrip(t));
}

TEST(TensorTransfer, EncodingDoesNotCopyTheElements) {
  Tensor t(DT_FLOAT, TensorShape({1 << 20}));
  grpc::ByteBuffer b = EncodeTensorToByteBuffer(t);
  std::vector<grpc::Slice> slices;
  ASSERT_TRUE(b.Dump(&slices).ok());
  ASSERT_EQ(slices.size(), 2u);
  EXPECT_EQ(static_cast<const void*>(slices[1].begin()), t.raw_data()) << "the payload slice points at the tensor";
}

TEST(TensorTransfer, TruncatedPayloadIsAnErrorNamingSizes) {
  Tensor t = Tensor::FromVector<float>({1, 2, 3, 4});
  grpc::ByteBuffer b = EncodeTensorToByteBuffer(t);
  std::vector<grpc::Slice> slices;
  ASSERT_TRUE(b.Dump(&slices).ok());
  std::string all;
  for (auto& s : slices) all.append(reinterpret_cast<const char*>(s.begin()), s.size());
  for (size_t cut : {size_t{0}, size_t{2}, size_t{6}, all.size() - 1}) {
    grpc::Slice part(all.data(), cut);
    grpc::ByteBuffer truncated(&part, 1);
    absl::StatusOr<Tensor> r = DecodeTensorFromByteBuffer(truncated);
    EXPECT_FALSE(r.ok()) << "cut at " << cut;
  }
  grpc::Slice part(all.data(), all.size() - 1);
  grpc::ByteBuffer truncated(&part, 1);
  EXPECT_NE(DecodeTensorFromByteBuffer(truncated).status().message().find("needs 4 x 4 bytes but 15 arrived"),
            std::string::npos);
}

TEST(TensorTransfer, GarbageHeaderIsAnError) {
  std::string junk = std::string("\x05\x00\x00\x00", 4) + "\xff\xff\xff\xff\xff";
  grpc::Slice s(junk.data(), junk.size());
  grpc::ByteBuffer b(&s, 1);
  EXPECT_FALSE(DecodeTensorFromByteBuffer(b).ok());
  std::string huge = std::string("\xff\xff\xff\x7f", 4);
  grpc::Slice h(huge.data(), huge.size());
  grpc::ByteBuffer hb(&h, 1);
  EXPECT_FALSE(DecodeTensorFromByteBuffer(hb).ok());
}

}  // namespace
}  // namespace distflow
