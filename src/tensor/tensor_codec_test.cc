#include "tensor/tensor_codec.h"

#include "gtest/gtest.h"
#include "proto/tensor.pb.h"
#include "tensor/tensor_testutil.h"

namespace distflow {
namespace {

Tensor RoundTrip(const Tensor& t) {
  proto::TensorProto p;
  EncodeTensor(t, &p);
  std::string bytes = p.SerializeAsString();
  absl::StatusOr<Tensor> back = ParseTensor(bytes.data(), bytes.size());
  EXPECT_TRUE(back.ok()) << back.status();
  return back.ok() ? *back : Tensor();
}

TEST(TensorCodec, RoundTripsEveryDtype) {
  EXPECT_TENSOR_EQ(Tensor::FromVector<float>({1.5f, -2.f, 3e30f}, TensorShape({3, 1})),
                   RoundTrip(Tensor::FromVector<float>({1.5f, -2.f, 3e30f}, TensorShape({3, 1}))));
  std::vector<Tensor> cases = {
      Tensor::FromVector<double>({1e-300, 2.5}),
      Tensor::FromVector<int32_t>({-1, 0, 7, 2147483647}, TensorShape({2, 2})),
      Tensor::FromVector<int64_t>({int64_t{1} << 62, -3}),
      Tensor::FromVector<uint8_t>({0, 255, 128}),
      Tensor::FromVector<bool>({true, false, true}),
      Tensor::FromVector<std::string>({"", std::string("a\0b", 3), "hello"}),
      Tensor::Scalar<float>(3.f),
      Tensor::Scalar<std::string>("scalar"),
      Tensor(DT_INT64, TensorShape({0, 4})),
      Tensor(DT_STRING, TensorShape({2, 0})),
  };
  for (const Tensor& t : cases) EXPECT_TENSOR_EQ(t, RoundTrip(t));
}

TEST(TensorCodec, RoundTripsASlice) {
  Tensor t = Tensor::FromVector<int32_t>({1, 2, 3, 4, 5, 6}, TensorShape({3, 2}));
  EXPECT_TENSOR_EQ(Tensor::FromVector<int32_t>({3, 4, 5, 6}, TensorShape({2, 2})), RoundTrip(t.Slice(1, 3)));
}

struct Malformed {
  const char* name;
  std::function<void(proto::TensorProto*)> mutate;
  const char* expect_in_message;
};

TEST(TensorCodec, RejectsMalformedInputWithAClearMessage) {
  const std::vector<Malformed> cases = {
      {"unknown dtype", [](proto::TensorProto* p) { p->set_dtype(static_cast<proto::DataType>(42)); },
       "unknown dtype 42"},
      {"invalid dtype", [](proto::TensorProto* p) { p->set_dtype(proto::DT_INVALID); }, "unknown dtype 0"},
      {"negative dim", [](proto::TensorProto* p) { p->mutable_shape()->set_dim(0, -2); }, "negative"},
      {"truncated content",
       [](proto::TensorProto* p) { p->mutable_tensor_content()->resize(p->tensor_content().size() - 1); }, "found 23"},
      {"too much content", [](proto::TensorProto* p) { p->mutable_tensor_content()->append("x"); }, "found 25"},
      {"absurd dims, tiny payload",
       [](proto::TensorProto* p) {
         p->mutable_shape()->set_dim(0, int64_t{1} << 40);
         p->mutable_shape()->set_dim(1, int64_t{1} << 20);
       },
       "needs"},
      {"overflowing dims",
       [](proto::TensorProto* p) {
         p->mutable_shape()->set_dim(0, int64_t{1} << 40);
         p->mutable_shape()->set_dim(1, int64_t{1} << 40);
       },
       "int64"},
      {"unknown rank", [](proto::TensorProto* p) { p->mutable_shape()->set_unknown_rank(true); }, "unknown rank"},
      {"rank 40",
       [](proto::TensorProto* p) {
         for (int i = 0; i < 38; ++i) p->mutable_shape()->add_dim(1);
       },
       "maximum"},
      {"strings on a float tensor", [](proto::TensorProto* p) { p->add_string_val("x"); }, "string_val"},
  };
  Tensor base = Tensor::FromVector<float>({1, 2, 3, 4, 5, 6}, TensorShape({2, 3}));
  for (const Malformed& c : cases) {
    proto::TensorProto p;
    EncodeTensor(base, &p);
    c.mutate(&p);
    absl::StatusOr<Tensor> t = DecodeTensor(p);
    ASSERT_FALSE(t.ok()) << c.name;
    EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument) << c.name;
    EXPECT_NE(t.status().message().find(c.expect_in_message), std::string::npos)
        << c.name << ": " << t.status().message();
  }
}

TEST(TensorCodec, RejectsWrongStringCount) {
  proto::TensorProto p;
  EncodeTensor(Tensor::FromVector<std::string>({"a", "b", "c"}), &p);
  p.mutable_string_val()->RemoveLast();
  auto t = DecodeTensor(p);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("found 2"), std::string::npos) << t.status();
  p.set_tensor_content("zz");
  EXPECT_FALSE(DecodeTensor(p).ok());
}

TEST(TensorCodec, RejectsNonCanonicalBool) {
  proto::TensorProto p;
  EncodeTensor(Tensor::FromVector<bool>({true, false}), &p);
  (*p.mutable_tensor_content())[1] = 7;
  auto t = DecodeTensor(p);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("byte value 7"), std::string::npos);
}

TEST(TensorCodec, GarbageBytesAreAnErrorNotACrash) {
  const std::string garbage[] = {std::string("\xff\xff\xff", 3), std::string("\x0a\xff\xff\xff\xff\x0f", 6),
                                 std::string("\x1a\x80", 2)};
  for (const std::string& g : garbage) {
    auto t = ParseTensor(g.data(), g.size());
    EXPECT_FALSE(t.ok());
  }
}

TEST(TensorCodec, DecodeShapeRejectsUnknownDims) {
  proto::TensorShapeProto s;
  s.add_dim(3);
  s.add_dim(-1);
  EXPECT_FALSE(DecodeShape(s).ok());
}

}  // namespace
}  // namespace distflow
