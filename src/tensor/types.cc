#include "distflow/types.h"

#include "absl/strings/str_cat.h"

namespace distflow {

std::string DataTypeName(DataType dt) {
  switch (dt) {
    case DT_FLOAT:
      return "float32";
    case DT_DOUBLE:
      return "float64";
    case DT_INT32:
      return "int32";
    case DT_INT64:
      return "int64";
    case DT_UINT8:
      return "uint8";
    case DT_BOOL:
      return "bool";
    case DT_STRING:
      return "string";
    case DT_INVALID:
      break;
  }
  return absl::StrCat("invalid(", static_cast<int>(dt), ")");
}

absl::Status ParseDataType(absl::string_view name, DataType* out) {
  static constexpr std::pair<absl::string_view, DataType> kNames[] = {
      {"float32", DT_FLOAT}, {"float", DT_FLOAT}, {"float64", DT_DOUBLE}, {"double", DT_DOUBLE}, {"int32", DT_INT32},
      {"int64", DT_INT64},   {"uint8", DT_UINT8}, {"bool", DT_BOOL},      {"string", DT_STRING}};
  for (const auto& [n, dt] : kNames) {
    if (n == name) {
      *out = dt;
      return absl::OkStatus();
    }
  }
  return absl::InvalidArgumentError(
      absl::StrCat("Unknown dtype '", name, "'; expected one of float32, float64, int32, int64, uint8, bool, string"));
}

bool IsValidDataType(int v) {
  switch (v) {
    case DT_FLOAT:
    case DT_DOUBLE:
    case DT_INT32:
    case DT_INT64:
    case DT_UINT8:
    case DT_BOOL:
    case DT_STRING:
      return true;
    default:
      return false;
  }
}

size_t DataTypeSize(DataType dt) {
  switch (dt) {
    case DT_FLOAT:
      return 4;
    case DT_DOUBLE:
      return 8;
    case DT_INT32:
      return 4;
    case DT_INT64:
      return 8;
    case DT_UINT8:
      return 1;
    case DT_BOOL:
      return 1;
    default:
      return 0;
  }
}

bool DataTypeIsFloating(DataType dt) { return dt == DT_FLOAT || dt == DT_DOUBLE; }
bool DataTypeIsInteger(DataType dt) { return dt == DT_INT32 || dt == DT_INT64 || dt == DT_UINT8; }

}  // namespace distflow
