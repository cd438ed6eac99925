// Reading and writing a NodeDef's attributes. Getters validate: a missing
// attribute or one of the wrong kind is InvalidArgument naming the node and
// the attribute, so that a hand-written or forged GraphDef never crashes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "distflow/partial_shape.h"
#include "distflow/tensor.h"
#include "proto/graph.pb.h"

namespace distflow {

bool HasAttr(const proto::NodeDef& node, absl::string_view name);

void SetAttrInt(proto::NodeDef* node, absl::string_view name, int64_t v);
void SetAttrFloat(proto::NodeDef* node, absl::string_view name, double v);
void SetAttrBool(proto::NodeDef* node, absl::string_view name, bool v);
void SetAttrString(proto::NodeDef* node, absl::string_view name, absl::string_view v);
void SetAttrType(proto::NodeDef* node, absl::string_view name, DataType v);
void SetAttrShape(proto::NodeDef* node, absl::string_view name, const PartialShape& v);
void SetAttrTensor(proto::NodeDef* node, absl::string_view name, const Tensor& v);
void SetAttrIntList(proto::NodeDef* node, absl::string_view name, const std::vector<int64_t>& v);
void SetAttrFloatList(proto::NodeDef* node, absl::string_view name, const std::vector<double>& v);
void SetAttrTypeList(proto::NodeDef* node, absl::string_view name, const std::vector<DataType>& v);
void SetAttrStringList(proto::NodeDef* node, absl::string_view name, const std::vector<std::string>& v);

absl::StatusOr<int64_t> GetAttrInt(const proto::NodeDef& node, absl::string_view name);
absl::StatusOr<double> GetAttrFloat(const proto::NodeDef& node, absl::string_view name);
absl::StatusOr<bool> GetAttrBool(const proto::NodeDef& node, absl::string_view name);
absl::StatusOr<std::string> GetAttrString(const proto::NodeDef& node, absl::string_view name);
absl::StatusOr<DataType> GetAttrType(const proto::NodeDef& node, absl::string_view name);
absl::StatusOr<PartialShape> GetAttrShape(const proto::NodeDef& node, absl::string_view name);
absl::StatusOr<Tensor> GetAttrTensor(const proto::NodeDef& node, absl::string_view name);
absl::StatusOr<std::vector<int64_t>> GetAttrIntList(const proto::NodeDef& node, absl::string_view name);
absl::StatusOr<std::vector<double>> GetAttrFloatList(const proto::NodeDef& node, absl::string_view name);
absl::StatusOr<std::vector<DataType>> GetAttrTypeList(const proto::NodeDef& node, absl::string_view name);
absl::StatusOr<std::vector<std::string>> GetAttrStringList(const proto::NodeDef& node, absl::string_view name);

// "int", "float", "bool", "string", "type", "shape", "tensor", "list(int)", ...;
// "<unset>" for an empty AttrValue.
std::string AttrKind(const proto::AttrValue& v);

// A short printable form of an attribute, for error messages and logs.
std::string AttrDebugString(const proto::AttrValue& v);

}  // namespace distflow
