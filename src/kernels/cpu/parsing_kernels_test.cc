// DecodeRaw and ParseExample, run through OpTest (graph, shape inference,
// kernel), with Examples built by the generated proto classes.
#include "gmock/gmock.h"
#include "graph/attr_value.h"
#include "gtest/gtest.h"
#include "kernels/op_test_util.h"
#include "proto/example.pb.h"

namespace distflow {
namespace {

using ::testing::HasSubstr;

std::string MakeExample(int64_t label, const std::string& raw, std::vector<float> floats) {
  tfexample::Example e;
  auto& f = *e.mutable_features()->mutable_feature();
  f["label"].mutable_int64_list()->add_value(label);
  f["raw"].mutable_bytes_list()->add_value(raw);
  for (float x : floats) f["floats"].mutable_float_list()->add_value(x);
  return e.SerializeAsString();
}

std::string EmptyExample() {
  tfexample::Example e;
  e.mutable_features();
  return e.SerializeAsString();
}

void ParseAttrs(proto::NodeDef* def, std::vector<std::string> sparse, std::vector<DataType> sparse_types,
                std::vector<std::string> dense, std::vector<DataType> dense_types, std::vector<int64_t> shapes) {
  SetAttrInt(def, "Nsparse", static_cast<int64_t>(sparse.size()));
  SetAttrStringList(def, "sparse_keys", sparse);
  SetAttrStringList(def, "dense_keys", dense);
  SetAttrTypeList(def, "sparse_types", sparse_types);
  SetAttrTypeList(def, "Tdense", dense_types);
  SetAttrIntList(def, "dense_shapes", shapes);
}

TEST(DecodeRaw, BytesAsNumbers) {
  test::OpTest t("DecodeRaw");
  float v[2] = {1.5f, -2.f};
  t.Input(Tensor::FromVector(std::vector<std::string>{std::string(reinterpret_cast<char*>(v), 8)}));
  SetAttrType(t.def(), "out_type", DT_FLOAT);
  DF_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> out, t.Run());
  EXPECT_EQ(out[0].shape(), TensorShape({1, 2}));
  EXPECT_EQ(out[0].flat<float>()[1], -2.f);

  test::OpTest bad("DecodeRaw");
  bad.Input(Tensor::Scalar<std::string>("abc"));
  SetAttrType(bad.def(), "out_type", DT_INT32);
  EXPECT_THAT(std::string(bad.Run().status().message()), HasSubstr("not a whole number of int32"));
}

TEST(ParseExample, DenseAndSparseFeatures) {
  test::OpTest t("ParseExample");
  t.Input(Tensor::FromVector(std::vector<std::string>{MakeExample(7, "ab", {1, 2, 3}), MakeExample(9, "cd", {4})}));
  t.Input(Tensor(DT_INT64, TensorShape({0})));  // label: required
  t.Input(Tensor(DT_STRING, TensorShape({0})));
  ParseAttrs(t.def(), {"floats"}, {DT_FLOAT}, {"label", "raw"}, {DT_INT64, DT_STRING}, {0, 0});
  DF_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> out, t.Run());
  ASSERT_EQ(out.size(), 5u);
  EXPECT_EQ(out[0].shape(), TensorShape({4, 2}));  // indices
  EXPECT_EQ(std::vector<int64_t>(out[0].flat<int64_t>().begin(), out[0].flat<int64_t>().end()),
            (std::vector<int64_t>{0, 0, 0, 1, 0, 2, 1, 0}));
  EXPECT_EQ(out[1].flat<float>()[3], 4.f);
  EXPECT_EQ(std::vector<int64_t>(out[2].flat<int64_t>().begin(), out[2].flat<int64_t>().end()),
            (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(out[3].flat<int64_t>()[1], 9);
  EXPECT_EQ(out[4].flat<std::string>()[0], "ab");
}

TEST(ParseExample, ErrorsNameTheKeyAndExample) {
  auto run = [](std::vector<std::string> serialized, std::vector<int64_t> shapes, Tensor def) {
    test::OpTest t("ParseExample");
    t.Input(Tensor::FromVector(serialized));
    t.Input(def);
    ParseAttrs(t.def(), {}, {}, {"label"}, {DT_INT64}, shapes);
    return t.Run().status();
  };
  absl::Status missing = run({MakeExample(1, "", {}), EmptyExample()}, {0}, Tensor(DT_INT64, TensorShape({0})));
  EXPECT_THAT(std::string(missing.message()), HasSubstr("Example 1 lacks feature 'label'"));
  absl::Status shape = run({MakeExample(1, "", {})}, {1, 2}, Tensor(DT_INT64, TensorShape({0})));
  EXPECT_THAT(std::string(shape.message()), HasSubstr("has 1 values; its FixedLenFeature shape [2] needs 2"));
  absl::Status garbage = run({"\xff\xff\xff"}, {0}, Tensor(DT_INT64, TensorShape({0})));
  EXPECT_THAT(std::string(garbage.message()), HasSubstr("not a tf.train.Example"));
  // A default fills a missing key.
  test::OpTest t("ParseExample");
  t.Input(Tensor::FromVector(std::vector<std::string>{EmptyExample()}));
  t.Input(Tensor::FromVector(std::vector<int64_t>{-1}));
  ParseAttrs(t.def(), {}, {}, {"label"}, {DT_INT64}, {0});
  DF_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> out, t.Run());
  EXPECT_EQ(out[0].flat<int64_t>()[0], -1);
}

}  // namespace
}  // namespace distflow
