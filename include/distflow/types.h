// Element types of tensors and the compile-time mapping between C++ types and
// DataType values. The numeric values match proto/tensor.proto (and the
// TensorFlow numbering, so that anyone reading a dump recognises them).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "distflow/export.h"

namespace distflow {

enum DataType : int {
  DT_INVALID = 0,
  DT_FLOAT = 1,
  DT_DOUBLE = 2,
  DT_INT32 = 3,
  DT_UINT8 = 4,
  DT_STRING = 7,
  DT_INT64 = 9,
  DT_BOOL = 10,
};

// "float32", "float64", "int32", "int64", "uint8", "bool", "string", or
// "invalid(N)" for anything else.
DISTFLOW_EXPORT std::string DataTypeName(DataType dt);

// Parses the names above (and "float", "double" as aliases).
DISTFLOW_EXPORT absl::Status ParseDataType(absl::string_view name, DataType* out);

// True for the seven types above.
DISTFLOW_EXPORT bool IsValidDataType(int value);

// Bytes per element for fixed-size types; 0 for DT_STRING and invalid types.
DISTFLOW_EXPORT size_t DataTypeSize(DataType dt);

DISTFLOW_EXPORT bool DataTypeIsFloating(DataType dt);  // float32, float64
DISTFLOW_EXPORT bool DataTypeIsInteger(DataType dt);   // int32, int64, uint8
inline bool DataTypeIsNumeric(DataType dt) { return DataTypeIsFloating(dt) || DataTypeIsInteger(dt); }

template <typename T>
struct DataTypeToEnum;  // undefined for unsupported types: a compile error
#define DF_MATCH_TYPE_AND_ENUM(TYPE, ENUM)  \
  template <>                               \
  struct DataTypeToEnum<TYPE> {             \
    static constexpr DataType value = ENUM; \
  };
DF_MATCH_TYPE_AND_ENUM(float, DT_FLOAT)
DF_MATCH_TYPE_AND_ENUM(double, DT_DOUBLE)
DF_MATCH_TYPE_AND_ENUM(int32_t, DT_INT32)
DF_MATCH_TYPE_AND_ENUM(int64_t, DT_INT64)
DF_MATCH_TYPE_AND_ENUM(uint8_t, DT_UINT8)
DF_MATCH_TYPE_AND_ENUM(bool, DT_BOOL)
DF_MATCH_TYPE_AND_ENUM(std::string, DT_STRING)
#undef DF_MATCH_TYPE_AND_ENUM

// A value-less tag carrying a type, for VisitDataType callbacks.
template <typename T>
struct TypeTag {
  using type = T;
};

// Calls fn(TypeTag<T>{}) with the C++ type of `dt` and returns its result.
// `dt` must be valid: callers check with IsValidDataType first (an invalid
// value is treated as float).
template <typename Fn>
decltype(auto) VisitDataType(DataType dt, Fn&& fn) {
  switch (dt) {
    case DT_DOUBLE:
      return fn(TypeTag<double>{});
    case DT_INT32:
      return fn(TypeTag<int32_t>{});
    case DT_INT64:
      return fn(TypeTag<int64_t>{});
    case DT_UINT8:
      return fn(TypeTag<uint8_t>{});
    case DT_BOOL:
      return fn(TypeTag<bool>{});
    case DT_STRING:
      return fn(TypeTag<std::string>{});
    case DT_FLOAT:
    default:
      return fn(TypeTag<float>{});
  }
}

}  // namespace distflow
