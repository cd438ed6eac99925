#include "distflow/types.h"

#include "gtest/gtest.h"

namespace distflow {
namespace {

TEST(DataType, NamesRoundTrip) {
  for (DataType dt : {DT_FLOAT, DT_DOUBLE, DT_INT32, DT_INT64, DT_UINT8, DT_BOOL, DT_STRING}) {
    DataType parsed = DT_INVALID;
    ASSERT_TRUE(ParseDataType(DataTypeName(dt), &parsed).ok()) << DataTypeName(dt);
    EXPECT_EQ(parsed, dt);
    EXPECT_TRUE(IsValidDataType(dt));
  }
}

TEST(DataType, UnknownNameListsChoices) {
  DataType dt;
  absl::Status s = ParseDataType("complex64", &dt);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("complex64"), std::string::npos);
  EXPECT_NE(s.message().find("float32"), std::string::npos);
}

TEST(DataType, SizesAndClasses) {
  EXPECT_EQ(DataTypeSize(DT_FLOAT), 4u);
  EXPECT_EQ(DataTypeSize(DT_INT64), 8u);
  EXPECT_EQ(DataTypeSize(DT_BOOL), 1u);
  EXPECT_EQ(DataTypeSize(DT_STRING), 0u);
  EXPECT_TRUE(DataTypeIsFloating(DT_DOUBLE));
  EXPECT_FALSE(DataTypeIsFloating(DT_INT32));
  EXPECT_TRUE(DataTypeIsInteger(DT_UINT8));
  EXPECT_FALSE(DataTypeIsNumeric(DT_BOOL));
  EXPECT_FALSE(IsValidDataType(5));
  EXPECT_EQ(DataTypeName(static_cast<DataType>(99)), "invalid(99)");
}

TEST(DataType, VisitDispatchesToTheRightType) {
  EXPECT_EQ(VisitDataType(DT_INT64, [](auto tag) { return sizeof(typename decltype(tag)::type); }), 8u);
  EXPECT_EQ(VisitDataType(DT_UINT8, [](auto tag) { return sizeof(typename decltype(tag)::type); }), 1u);
  EXPECT_EQ(DataTypeToEnum<double>::value, DT_DOUBLE);
}

}  // namespace
}  // namespace distflow
