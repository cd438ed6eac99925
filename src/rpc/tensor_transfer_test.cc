#include "rpc/tensor_transfer.h"

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
  std::vector<Tensor> cases = {Tensor::FromVector<float>({1, 2, 3, 4}, TensorShape({2, 2})),
                               Tensor::FromVector<double>({1e-300}),
                               Tensor::FromVector<int32_t>({-5}),
                               Tensor::FromVector<int64_t>({1, 2, 3}),
                               Tensor::FromVector<uint8_t>({255}),
                               Tensor::FromVector<bool>({true, false}),
                               Tensor::FromVector<std::string>({"a", std::string("\0b", 2)}),
                               Tensor(DT_FLOAT, TensorShape({0, 3})),
                               Tensor::Scalar<float>(2.5f)};
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

// A bundle's answer: its tensors, in order, each as a lone tensor would be;
// bytes flattened into one slice (as a network read may deliver them)
// decode the same; a cut anywhere, a wrong count or extra bytes are DataLoss.
TEST(TensorTransfer, BundlesRoundTripAndRejectTruncationAndExtraBytes) {
  std::vector<Tensor> tensors = {Tensor::FromVector<float>({1, 2, 3, 4}, TensorShape({2, 2})),
                                 Tensor::FromVector<int64_t>({7, 8}), Tensor::Scalar<bool>(true),
                                 Tensor::FromVector<std::string>({"id"})};
  grpc::ByteBuffer b = EncodeTensorBundle(tensors);
  absl::StatusOr<std::vector<Tensor>> back = DecodeTensorBundle(b, tensors.size());
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(back->size(), tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) EXPECT_TENSOR_EQ(tensors[i], (*back)[i]);
  std::vector<grpc::Slice> slices;
  ASSERT_TRUE(b.Dump(&slices).ok());
  std::string all;
  for (auto& s : slices) all.append(reinterpret_cast<const char*>(s.begin()), s.size());
  grpc::Slice flat(all.data(), all.size());
  grpc::ByteBuffer one(&flat, 1);
  absl::StatusOr<std::vector<Tensor>> again = DecodeTensorBundle(one, tensors.size());
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TENSOR_EQ(tensors[1], (*again)[1]);
  for (size_t cut : {size_t{0}, size_t{5}, size_t{8}, size_t{20}, all.size() - 1}) {
    grpc::Slice part(all.data(), cut);
    grpc::ByteBuffer truncated(&part, 1);
    EXPECT_EQ(DecodeTensorBundle(truncated, tensors.size()).status().code(), absl::StatusCode::kDataLoss)
        << "cut at " << cut;
  }
  EXPECT_EQ(DecodeTensorBundle(one, tensors.size() + 1).status().code(), absl::StatusCode::kDataLoss);
  absl::Status extra = DecodeTensorBundle(one, tensors.size() - 1).status();
  EXPECT_EQ(extra.code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(extra.message().find("extra bytes"), std::string::npos) << extra;
}

// A large member of a bundle may travel as a bulk header (its bytes over the
// bulk port): the decoder reports where to fetch it, allocates the tensor
// with its shape, and keeps the inline members; a receiver that did not
// accept the bulk port gets DataLoss instead of an empty tensor.
TEST(TensorTransfer, BundlePartsMayBeBulkHeaders) {
  Tensor small = Tensor::FromVector<int64_t>({7, 8});
  Tensor large(DT_FLOAT, TensorShape({512, 1024}));
  std::vector<grpc::ByteBuffer> parts = {EncodeTensorToByteBuffer(small), EncodeBulkTensorHeader(large, 42, 5001)};
  grpc::ByteBuffer b = EncodeTensorBundle(parts);
  std::vector<grpc::Slice> slices;
  ASSERT_TRUE(b.Dump(&slices).ok());
  size_t total = 0;
  for (auto& s : slices) total += s.size();
  EXPECT_LT(total, 200u) << "the large tensor's bytes are not in the answer";
  std::vector<BulkRef> refs;
  absl::StatusOr<std::vector<Tensor>> back = DecodeTensorBundle(b, 2, &refs);
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(refs.size(), 2u);
  EXPECT_EQ(refs[0].ticket, 0u);
  EXPECT_TENSOR_EQ(small, (*back)[0]);
  EXPECT_EQ(refs[1].ticket, 42u);
  EXPECT_EQ(refs[1].port, 5001);
  EXPECT_EQ((*back)[1].shape(), large.shape());
  absl::Status refused = DecodeTensorBundle(b, 2).status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(refused.message().find("Tensor 1 of a bundle"), std::string::npos) << refused;
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

TEST(TensorTransfer, BulkHeaderAllocatesTheTensorAndSaysWhereItsBytesAre) {
  Tensor t = Tensor::FromVector<double>({1, 2, 3}, TensorShape({3, 1}));
  grpc::ByteBuffer b = EncodeBulkTensorHeader(t, 0x1234, 4242);
  BulkRef ref;
  absl::StatusOr<Tensor> r = DecodeTensorFromByteBuffer(b, &ref);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->dtype(), DT_DOUBLE);
  EXPECT_EQ(r->shape(), TensorShape({3, 1}));
  EXPECT_EQ(ref.ticket, 0x1234u);
  EXPECT_EQ(ref.port, 4242);
  // A receiver that did not ask for bulk answers refuses one.
  EXPECT_EQ(DecodeTensorFromByteBuffer(b).status().code(), absl::StatusCode::kDataLoss);
}

TEST(TensorTransfer, MalformedBulkHeadersAreDataLoss) {
  BulkRef ref;
  // A port out of range.
  grpc::ByteBuffer bad_port = EncodeBulkTensorHeader(Tensor::FromVector<float>({1}), 7, 70000);
  EXPECT_EQ(DecodeTensorFromByteBuffer(bad_port, &ref).status().code(), absl::StatusCode::kDataLoss);
  // Strings and bools never travel in bulk.
  grpc::ByteBuffer strings = EncodeBulkTensorHeader(Tensor::FromVector<std::string>({"a"}), 7, 80);
  EXPECT_EQ(DecodeTensorFromByteBuffer(strings, &ref).status().code(), absl::StatusCode::kDataLoss);
  grpc::ByteBuffer bools = EncodeBulkTensorHeader(Tensor::FromVector<bool>({true}), 7, 80);
  EXPECT_EQ(DecodeTensorFromByteBuffer(bools, &ref).status().code(), absl::StatusCode::kDataLoss);
  // Bytes after a bulk header.
  grpc::ByteBuffer ok = EncodeBulkTensorHeader(Tensor::FromVector<float>({1}), 7, 80);
  std::vector<grpc::Slice> slices;
  ASSERT_TRUE(ok.Dump(&slices).ok());
  std::string all;
  for (auto& sl : slices) all.append(reinterpret_cast<const char*>(sl.begin()), sl.size());
  all += "xyz";
  grpc::Slice extra(all.data(), all.size());
  grpc::ByteBuffer with_extra(&extra, 1);
  absl::StatusOr<Tensor> r = DecodeTensorFromByteBuffer(with_extra, &ref);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(r.status().message().find("3 extra bytes"), std::string::npos) << r.status();
}

TEST(TensorTransfer, DeadTensorRoundTripsAsDeadAndCarriesNoPayload) {
  // A dead _Send sends an uninitialized tensor: the header says so and no bytes follow.
  grpc::ByteBuffer b = EncodeTensorToByteBuffer(Tensor());
  std::vector<grpc::Slice> slices;
  ASSERT_TRUE(b.Dump(&slices).ok());
  ASSERT_EQ(slices.size(), 1u) << "no payload slice for a dead tensor";
  absl::StatusOr<Tensor> back = DecodeTensorFromByteBuffer(b);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_FALSE(back->IsInitialized()) << "a dead tensor decodes as dead";
  // So does it where bulk answers are accepted, without a bulk reference.
  BulkRef ref{99, 99};
  back = DecodeTensorFromByteBuffer(b, &ref);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_FALSE(back->IsInitialized());
  EXPECT_EQ(ref.ticket, 0u);
  // A live tensor with no elements is not mistaken for a dead one.
  Tensor empty(DT_FLOAT, TensorShape({0, 3}));
  absl::StatusOr<Tensor> live = DecodeTensorFromByteBuffer(EncodeTensorToByteBuffer(empty));
  ASSERT_TRUE(live.ok()) << live.status();
  EXPECT_TRUE(live->IsInitialized());
  EXPECT_EQ(live->shape(), TensorShape({0, 3}));
}

TEST(TensorTransfer, DeadHeaderFollowedByBytesIsDataLoss) {
  grpc::ByteBuffer dead = EncodeTensorToByteBuffer(Tensor());
  std::vector<grpc::Slice> slices;
  ASSERT_TRUE(dead.Dump(&slices).ok());
  std::string all;
  for (auto& sl : slices) all.append(reinterpret_cast<const char*>(sl.begin()), sl.size());
  all += "abcd";
  grpc::Slice forged(all.data(), all.size());
  absl::StatusOr<Tensor> r = DecodeTensorFromByteBuffer(grpc::ByteBuffer(&forged, 1));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(r.status().message().find("dead"), std::string::npos) << r.status();
}

}  // namespace
}  // namespace distflow
