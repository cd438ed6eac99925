#include "graph/attr_value.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "tensor/tensor_codec.h"

namespace distflow {
namespace {

proto::AttrValue& Mutable(proto::NodeDef* node, absl::string_view name) {
  return (*node->mutable_attr())[std::string(name)];
}

absl::StatusOr<const proto::AttrValue*> Find(const proto::NodeDef& node, absl::string_view name,
                                             proto::AttrValue::ValueCase want, const char* kind) {
  auto it = node.attr().find(std::string(name));
  if (it == node.attr().end()) {
    return absl::InvalidArgumentError(
        absl::StrCat("Node '", node.name(), "' (", node.op(), ") has no attribute '", name, "'"));
  }
  if (it->second.value_case() != want) {
    return absl::InvalidArgumentError(absl::StrCat("Attribute '", name, "' of node '", node.name(), "' (", node.op(),
                                                   ") should be ", kind, " but is ", AttrKind(it->second)));
  }
  return &it->second;
}

absl::StatusOr<const proto::AttrValue::ListValue*> FindList(const proto::NodeDef& node, absl::string_view name,
                                                            const char* kind) {
  ASSIGN_OR_RETURN(const proto::AttrValue* v, Find(node, name, proto::AttrValue::kList, kind));
  return &v->list();
}

}  // namespace

bool HasAttr(const proto::NodeDef& node, absl::string_view name) { return node.attr().count(std::string(name)) > 0; }

void SetAttrInt(proto::NodeDef* n, absl::string_view name, int64_t v) { Mutable(n, name).set_i(v); }
void SetAttrFloat(proto::NodeDef* n, absl::string_view name, double v) { Mutable(n, name).set_f(v); }
void SetAttrBool(proto::NodeDef* n, absl::string_view name, bool v) { Mutable(n, name).set_b(v); }
void SetAttrString(proto::NodeDef* n, absl::string_view name, absl::string_view v) {
  Mutable(n, name).set_s(std::string(v));
}
void SetAttrType(proto::NodeDef* n, absl::string_view name, DataType v) {
  Mutable(n, name).set_type(static_cast<proto::DataType>(v));
}
void SetAttrShape(proto::NodeDef* n, absl::string_view name, const PartialShape& v) {
  v.ToProto(Mutable(n, name).mutable_shape());
}
void SetAttrTensor(proto::NodeDef* n, absl::string_view name, const Tensor& v) {
  EncodeTensor(v, Mutable(n, name).mutable_tensor());
}
void SetAttrIntList(proto::NodeDef* n, absl::string_view name, const std::vector<int64_t>& v) {
  auto* l = Mutable(n, name).mutable_list();
  l->Clear();
  for (int64_t x : v) l->add_i(x);
}
void SetAttrFloatList(proto::NodeDef* n, absl::string_view name, const std::vector<double>& v) {
  auto* l = Mutable(n, name).mutable_list();
  l->Clear();
  for (double x : v) l->add_f(x);
}
void SetAttrTypeList(proto::NodeDef* n, absl::string_view name, const std::vector<DataType>& v) {
  auto* l = Mutable(n, name).mutable_list();
  l->Clear();
  for (DataType x : v) l->add_type(static_cast<proto::DataType>(x));
}

void SetAttrStringList(proto::NodeDef* n, absl::string_view name, const std::vector<std::string>& v) {
  auto* l = Mutable(n, name).mutable_list();
  l->Clear();
  for (const std::string& x : v) l->add_s(x);
}

absl::StatusOr<int64_t> GetAttrInt(const proto::NodeDef& n, absl::string_view name) {
  ASSIGN_OR_RETURN(const proto::AttrValue* v, Find(n, name, proto::AttrValue::kI, "int"));
  return v->i();
}
absl::StatusOr<double> GetAttrFloat(const proto::NodeDef& n, absl::string_view name) {
  ASSIGN_OR_RETURN(const proto::AttrValue* v, Find(n, name, proto::AttrValue::kF, "float"));
  return v->f();
}
absl::StatusOr<bool> GetAttrBool(const proto::NodeDef& n, absl::string_view name) {
  ASSIGN_OR_RETURN(const proto::AttrValue* v, Find(n, name, proto::AttrValue::kB, "bool"));
  return v->b();
}
absl::StatusOr<std::string> GetAttrString(const proto::NodeDef& n, absl::string_view name) {
  ASSIGN_OR_RETURN(const proto::AttrValue* v, Find(n, name, proto::AttrValue::kS, "string"));
  return v->s();
}
absl::StatusOr<DataType> GetAttrType(const proto::NodeDef& n, absl::string_view name) {
  ASSIGN_OR_RETURN(const proto::AttrValue* v, Find(n, name, proto::AttrValue::kType, "type"));
  int t = v->type();
  if (!IsValidDataType(t)) {
    return absl::InvalidArgumentError(
        absl::StrCat("Attribute '", name, "' of node '", n.name(), "' names unknown dtype ", t));
  }
  return static_cast<DataType>(t);
}
absl::StatusOr<PartialShape> GetAttrShape(const proto::NodeDef& n, absl::string_view name) {
  ASSIGN_OR_RETURN(const proto::AttrValue* v, Find(n, name, proto::AttrValue::kShape, "shape"));
  auto s = PartialShape::FromProto(v->shape());
  if (!s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("Attribute '", name, "' of node '", n.name(), "': ", s.status().message()));
  }
  return s;
}
absl::StatusOr<Tensor> GetAttrTensor(const proto::NodeDef& n, absl::string_view name) {
  ASSIGN_OR_RETURN(const proto::AttrValue* v, Find(n, name, proto::AttrValue::kTensor, "tensor"));
  auto t = DecodeTensor(v->tensor());
  if (!t.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("Attribute '", name, "' of node '", n.name(), "': ", t.status().message()));
  }
  return t;
}
absl::StatusOr<std::vector<int64_t>> GetAttrIntList(const proto::NodeDef& n, absl::string_view name) {
  ASSIGN_OR_RETURN(const proto::AttrValue::ListValue* l, FindList(n, name, "list(int)"));
  return std::vector<int64_t>(l->i().begin(), l->i().end());
}
absl::StatusOr<std::vector<double>> GetAttrFloatList(const proto::NodeDef& n, absl::string_view name) {
  ASSIGN_OR_RETURN(const proto::AttrValue::ListValue* l, FindList(n, name, "list(float)"));
  return std::vector<double>(l->f().begin(), l->f().end());
}
absl::StatusOr<std::vector<DataType>> GetAttrTypeList(const proto::NodeDef& n, absl::string_view name) {
  ASSIGN_OR_RETURN(const proto::AttrValue::ListValue* l, FindList(n, name, "list(type)"));
  std::vector<DataType> out;
  for (int t : l->type()) {
    if (!IsValidDataType(t)) {
      return absl::InvalidArgumentError(
          absl::StrCat("Attribute '", name, "' of node '", n.name(), "' names unknown dtype ", t));
    }
    out.push_back(static_cast<DataType>(t));
  }
  return out;
}

absl::StatusOr<std::vector<std::string>> GetAttrStringList(const proto::NodeDef& n, absl::string_view name) {
  ASSIGN_OR_RETURN(const proto::AttrValue::ListValue* l, FindList(n, name, "list(string)"));
  return std::vector<std::string>(l->s().begin(), l->s().end());
}

std::string AttrKind(const proto::AttrValue& v) {
  switch (v.value_case()) {
    case proto::AttrValue::kI:
      return "int";
    case proto::AttrValue::kF:
      return "float";
    case proto::AttrValue::kB:
      return "bool";
    case proto::AttrValue::kS:
      return "string";
    case proto::AttrValue::kType:
      return "type";
    case proto::AttrValue::kShape:
      return "shape";
    case proto::AttrValue::kTensor:
      return "tensor";
    case proto::AttrValue::kList: {
      const auto& l = v.list();
      if (l.i_size()) return "list(int)";
      if (l.f_size()) return "list(float)";
      if (l.b_size()) return "list(bool)";
      if (l.s_size()) return "list(string)";
      if (l.type_size()) return "list(type)";
      if (l.shape_size()) return "list(shape)";
      if (l.tensor_size()) return "list(tensor)";
      return "list()";
    }
    case proto::AttrValue::VALUE_NOT_SET:
      break;
  }
  return "<unset>";
}

std::string AttrDebugString(const proto::AttrValue& v) {
  switch (v.value_case()) {
    case proto::AttrValue::kI:
      return absl::StrCat(v.i());
    case proto::AttrValue::kF:
      return absl::StrCat(v.f());
    case proto::AttrValue::kB:
      return v.b() ? "true" : "false";
    case proto::AttrValue::kS:
      return absl::StrCat("'", v.s(), "'");
    case proto::AttrValue::kType:
      return DataTypeName(static_cast<DataType>(v.type()));
    case proto::AttrValue::kShape: {
      auto s = PartialShape::FromProto(v.shape());
      return s.ok() ? s->DebugString() : "<bad shape>";
    }
    case proto::AttrValue::kTensor:
      return "<tensor>";
    case proto::AttrValue::kList: {
      const auto& l = v.list();
      if (l.i_size()) return absl::StrCat("[", absl::StrJoin(l.i(), ","), "]");
      if (l.f_size()) return absl::StrCat("[", absl::StrJoin(l.f(), ","), "]");
      return absl::StrCat("<", AttrKind(v), ">");
    }
    case proto::AttrValue::VALUE_NOT_SET:
      break;
  }
  return "<unset>";
}

}  // namespace distflow
