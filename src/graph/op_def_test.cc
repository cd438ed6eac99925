#include "graph/op_def.h"

#include <algorithm>

#include "distflow/op_registry.h"
#include "gtest/gtest.h"

namespace distflow {
namespace {

TEST(OpDefBuilder, ParsesArgsAndAttrs) {
  auto op = OpDefBuilder("Thing")
                .Input("a: T")
                .Input("b: N * T")
                .Input("v: Ref(T)")
                .Input("c: int32")
                .Output("out: float")
                .Attr("T: {float, double}")
                .Attr("N: int >= 2")
                .Attr("flag: bool = true")
                .Attr("name: string = 'x'")
                .Attr("rate: float = 0.5")
                .Attr("perm: list(int) = []")
                .Build();
  ASSERT_TRUE(op.ok()) << op.status();
  EXPECT_EQ(op->inputs[0].type_attr, "T");
  EXPECT_EQ(op->inputs[1].number_attr, "N");
  EXPECT_TRUE(op->inputs[2].is_ref);
  EXPECT_EQ(op->inputs[3].type, DT_INT32);
  EXPECT_EQ(op->FindAttr("T")->allowed_types.size(), 2u);
  EXPECT_TRUE(op->FindAttr("N")->has_minimum);
  EXPECT_EQ(op->FindAttr("N")->minimum, 2);
  EXPECT_TRUE(op->FindAttr("flag")->default_value.b());
  EXPECT_EQ(op->FindAttr("name")->default_value.s(), "x");
  EXPECT_DOUBLE_EQ(op->FindAttr("rate")->default_value.f(), 0.5);
}

TEST(OpDefBuilder, RejectsUndeclaredTypeAttr) {
  auto op = OpDefBuilder("Bad").Input("a: T").Build();
  ASSERT_FALSE(op.ok());
  EXPECT_NE(op.status().message().find("no attribute 'T'"), std::string::npos) << op.status();
}

TEST(OpDefBuilder, RejectsBadSpecs) {
  EXPECT_FALSE(OpDefBuilder("Bad").Attr("x: bool = maybe").Build().ok());
  EXPECT_FALSE(OpDefBuilder("Bad").Attr("x: complex").Build().ok());
  EXPECT_FALSE(OpDefBuilder("Bad").Attr("T: {float, quaternion}").Build().ok());
  EXPECT_FALSE(OpDefBuilder("Bad").Input("noname").Build().ok());
}

TEST(OpRegistry, DuplicateRegistrationFails) {
  OpRegistry r;
  ASSERT_TRUE(r.Register(OpDefBuilder("A")).ok());
  absl::Status s = r.Register(OpDefBuilder("A"));
  EXPECT_EQ(s.code(), absl::StatusCode::kAlreadyExists);
}

TEST(OpRegistry, UnknownOpSuggestsClosestNames) {
  auto s = OpRegistry::Global()->LookUpOrError("Idenity");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("did you mean Identity"), std::string::npos) << s.status();
}

TEST(OpInfo, RegisteredOpsDescribeInputsOutputsAndAttrs) {
  std::vector<OpInfo> ops = RegisteredOps();
  ASSERT_GT(ops.size(), 50u);
  EXPECT_TRUE(std::is_sorted(ops.begin(), ops.end(), [](const OpInfo& a, const OpInfo& b) { return a.name < b.name; }));
  absl::StatusOr<OpInfo> matmul = LookUpOp("MatMul");
  ASSERT_TRUE(matmul.ok()) << matmul.status();
  ASSERT_EQ(matmul->inputs.size(), 2u);
  EXPECT_EQ(matmul->inputs[0].name, "a");
  EXPECT_EQ(matmul->inputs[0].type_attr, "T");
  ASSERT_EQ(matmul->outputs.size(), 1u);
  const OpAttrInfo* transpose_a = nullptr;
  const OpAttrInfo* t = nullptr;
  for (const OpAttrInfo& a : matmul->attrs) {
    if (a.name == "transpose_a") transpose_a = &a;
    if (a.name == "T") t = &a;
  }
  ASSERT_NE(transpose_a, nullptr);
  EXPECT_EQ(transpose_a->kind, "bool");
  EXPECT_TRUE(transpose_a->has_default);
  EXPECT_EQ(transpose_a->default_value, "false");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->kind, "type");
  EXPECT_FALSE(t->has_default);
  EXPECT_TRUE(t->inferred) << "T comes from the inputs";
  EXPECT_FALSE(t->allowed_types.empty());

  absl::StatusOr<OpInfo> addn = LookUpOp("AddN");
  ASSERT_TRUE(addn.ok());
  EXPECT_EQ(addn->inputs[0].number_attr, "N");
  absl::StatusOr<OpInfo> variable = LookUpOp("Variable");
  ASSERT_TRUE(variable.ok());
  EXPECT_TRUE(variable->is_stateful);
  EXPECT_TRUE(variable->outputs[0].is_ref);

  absl::StatusOr<OpInfo> unknown = LookUpOp("MatMull");
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(unknown.status().message().find("MatMul"), std::string::npos) << unknown.status();
}

}  // namespace
}  // namespace distflow
