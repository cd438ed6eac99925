#include "graph/op_def.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "base/logging.h"
#include "base/status_macros.h"
#include "distflow/partial_shape.h"
#include "graph/ops/all_ops.h"

namespace distflow {
namespace {

absl::Status SpecError(const std::string& op, const std::string& spec, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("Op '", op, "': bad spec '", spec, "': ", why));
}

bool SplitNameColon(const std::string& spec, std::string* name, std::string* rest) {
  size_t colon = spec.find(':');
  if (colon == std::string::npos) return false;
  *name = std::string(absl::StripAsciiWhitespace(spec.substr(0, colon)));
  *rest = std::string(absl::StripAsciiWhitespace(spec.substr(colon + 1)));
  return !name->empty() && !rest->empty();
}

absl::Status ParseArg(const std::string& op, const std::string& spec, ArgDef* arg) {
  std::string rest;
  if (!SplitNameColon(spec, &arg->name, &rest)) return SpecError(op, spec, "expected 'name: type'");
  if (absl::StartsWith(rest, "Ref(") && absl::EndsWith(rest, ")")) {
    arg->is_ref = true;
    rest = rest.substr(4, rest.size() - 5);
  }
  size_t star = rest.find('*');
  if (star != std::string::npos) {
    arg->number_attr = std::string(absl::StripAsciiWhitespace(rest.substr(0, star)));
    rest = std::string(absl::StripAsciiWhitespace(rest.substr(star + 1)));
  }
  DataType dt;
  if (ParseDataType(rest, &dt).ok()) {
    arg->type = dt;
  } else {
    arg->type_attr = rest;
  }
  return absl::OkStatus();
}

absl::Status ParseDefault(const std::string& op, const std::string& spec, AttrDef* attr, std::string value) {
  attr->has_default = true;
  proto::AttrValue& v = attr->default_value;
  if (attr->kind == "int") {
    int64_t i;
    if (!absl::SimpleAtoi(value, &i)) return SpecError(op, spec, "default is not an int");
    v.set_i(i);
  } else if (attr->kind == "float") {
    double f;
    if (!absl::SimpleAtod(value, &f)) return SpecError(op, spec, "default is not a float");
    v.set_f(f);
  } else if (attr->kind == "bool") {
    if (value != "true" && value != "false") return SpecError(op, spec, "default is not true/false");
    v.set_b(value == "true");
  } else if (attr->kind == "string") {
    if (value.size() < 2 || value.front() != '\'' || value.back() != '\'') {
      return SpecError(op, spec, "string default must be quoted with ''");
    }
    v.set_s(value.substr(1, value.size() - 2));
  } else if (attr->kind == "type") {
    DataType dt;
    if (!ParseDataType(value, &dt).ok()) return SpecError(op, spec, "default is not a dtype");
    v.set_type(static_cast<proto::DataType>(dt));
  } else if (attr->kind == "shape") {
    if (value != "?") return SpecError(op, spec, "only ? (unknown rank) is supported as a shape default");
    PartialShape::Unknown().ToProto(v.mutable_shape());
  } else if (absl::StartsWith(attr->kind, "list(")) {
    if (value != "[]") return SpecError(op, spec, "only [] is supported as a list default");
    v.mutable_list();
  } else {
    return SpecError(op, spec, absl::StrCat("attributes of kind ", attr->kind, " take no default"));
  }
  return absl::OkStatus();
}

absl::Status ParseAttr(const std::string& op, const std::string& spec, AttrDef* attr) {
  std::string rest;
  if (!SplitNameColon(spec, &attr->name, &rest)) return SpecError(op, spec, "expected 'name: kind'");
  std::string def;
  size_t eq = rest.find('=');
  bool has_default = eq != std::string::npos && rest.compare(eq > 0 ? eq - 1 : 0, 2, ">=") != 0;
  if (has_default) {
    def = std::string(absl::StripAsciiWhitespace(rest.substr(eq + 1)));
    rest = std::string(absl::StripAsciiWhitespace(rest.substr(0, eq)));
  }
  if (absl::StartsWith(rest, "{") && absl::EndsWith(rest, "}")) {
    attr->kind = "type";
    for (absl::string_view t : absl::StrSplit(rest.substr(1, rest.size() - 2), ',')) {
      DataType dt;
      if (!ParseDataType(absl::StripAsciiWhitespace(t), &dt).ok()) {
        return SpecError(op, spec, absl::StrCat("unknown dtype '", t, "'"));
      }
      attr->allowed_types.push_back(dt);
    }
  } else if (absl::StartsWith(rest, "int") && rest.find(">=") != std::string::npos) {
    attr->kind = "int";
    attr->has_minimum = true;
    if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(rest.substr(rest.find(">=") + 2)), &attr->minimum)) {
      return SpecError(op, spec, "bad minimum");
    }
  } else {
    static const char* kKinds[] = {"int",    "float",     "bool",        "string",     "type",        "shape",
                                   "tensor", "list(int)", "list(float)", "list(type)", "list(shape)", "list(string)"};
    if (std::find(std::begin(kKinds), std::end(kKinds), rest) == std::end(kKinds)) {
      return SpecError(op, spec, absl::StrCat("unknown attribute kind '", rest, "'"));
    }
    attr->kind = rest;
  }
  if (has_default) return ParseDefault(op, spec, attr, def);
  return absl::OkStatus();
}

size_t EditDistance(const std::string& a, const std::string& b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t sub = prev[j - 1] + (absl::ascii_tolower(a[i - 1]) == absl::ascii_tolower(b[j - 1]) ? 0 : 1);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, sub});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

}  // namespace

const AttrDef* OpDef::FindAttr(const std::string& attr_name) const {
  for (const AttrDef& a : attrs)
    if (a.name == attr_name) return &a;
  return nullptr;
}

OpDefBuilder::OpDefBuilder(std::string name) { partial_.name = std::move(name); }
OpDefBuilder& OpDefBuilder::Input(std::string spec) {
  inputs_.push_back(std::move(spec));
  return *this;
}
OpDefBuilder& OpDefBuilder::Output(std::string spec) {
  outputs_.push_back(std::move(spec));
  return *this;
}
OpDefBuilder& OpDefBuilder::Attr(std::string spec) {
  attrs_.push_back(std::move(spec));
  return *this;
}
OpDefBuilder& OpDefBuilder::SetIsStateful() {
  partial_.is_stateful = true;
  return *this;
}
OpDefBuilder& OpDefBuilder::SetShapeFn(ShapeFn fn) {
  partial_.shape_fn = std::move(fn);
  return *this;
}

absl::StatusOr<OpDef> OpDefBuilder::Build() const {
  OpDef op = partial_;
  const std::string& name = op.name;
  for (const std::string& s : attrs_) {
    AttrDef a;
    RETURN_IF_ERROR(ParseAttr(name, s, &a));
    op.attrs.push_back(std::move(a));
  }
  auto parse_args = [&](const std::vector<std::string>& specs, std::vector<ArgDef>* out) -> absl::Status {
    for (const std::string& s : specs) {
      ArgDef arg;
      RETURN_IF_ERROR(ParseArg(name, s, &arg));
      if (!arg.type_attr.empty() && arg.number_attr.empty()) {
        // "name: Tlist" where Tlist is list(type): one tensor per listed dtype.
        const AttrDef* a = op.FindAttr(arg.type_attr);
        if (a != nullptr && a->kind == "list(type)") {
          arg.type_list_attr = arg.type_attr;
          arg.type_attr.clear();
        }
      }
      for (const std::string* ref : {&arg.type_attr, &arg.number_attr}) {
        if (ref->empty()) continue;
        const AttrDef* a = op.FindAttr(*ref);
        if (a == nullptr) return SpecError(name, s, absl::StrCat("no attribute '", *ref, "' declared"));
        const char* want = ref == &arg.type_attr ? "type" : "int";
        if (a->kind != want) return SpecError(name, s, absl::StrCat("attribute '", *ref, "' is not ", want));
      }
      out->push_back(std::move(arg));
    }
    return absl::OkStatus();
  };
  absl::Status st = parse_args(inputs_, &op.inputs);
  if (!st.ok()) return st;
  st = parse_args(outputs_, &op.outputs);
  if (!st.ok()) return st;
  return op;
}

OpRegistry* OpRegistry::Global() {
  static OpRegistry* registry = [] {
    auto* r = new OpRegistry;
    RegisterAllOps(r);
    return r;
  }();
  return registry;
}

absl::Status OpRegistry::Register(const OpDefBuilder& builder) {
  ASSIGN_OR_RETURN(OpDef op, builder.Build());
  absl::MutexLock lock(&mu_);
  if (ops_.count(op.name)) return absl::AlreadyExistsError(absl::StrCat("Op '", op.name, "' is already registered"));
  std::string key = op.name;
  ops_[key] = std::make_unique<OpDef>(std::move(op));
  return absl::OkStatus();
}

void OpRegistry::MustRegister(const OpDefBuilder& builder) { CHECK_OK(Register(builder)); }

const OpDef* OpRegistry::LookUp(const std::string& op) const {
  absl::MutexLock lock(&mu_);
  auto it = ops_.find(op);
  return it == ops_.end() ? nullptr : it->second.get();
}

absl::StatusOr<const OpDef*> OpRegistry::LookUpOrError(const std::string& op) const {
  const OpDef* def = LookUp(op);
  if (def != nullptr) return def;
  std::vector<std::string> close = ClosestNames(op, ListOps());
  return absl::NotFoundError(
      absl::StrCat("Op '", op, "' is not registered",
                   close.empty() ? "" : absl::StrCat("; did you mean ", absl::StrJoin(close, ", "), "?")));
}

std::vector<std::string> OpRegistry::ListOps() const {
  absl::MutexLock lock(&mu_);
  std::vector<std::string> out;
  for (const auto& [name, def] : ops_) out.push_back(name);
  return out;
}

std::vector<std::string> ClosestNames(const std::string& name, const std::vector<std::string>& candidates, size_t max) {
  std::vector<std::pair<size_t, std::string>> scored;
  for (const std::string& c : candidates) scored.emplace_back(EditDistance(name, c), c);
  std::sort(scored.begin(), scored.end());
  std::vector<std::string> out;
  size_t limit = std::max<size_t>(2, name.size() / 2);
  for (const auto& [d, c] : scored) {
    if (out.size() >= max || d > limit) break;
    out.push_back(c);
  }
  return out;
}

}  // namespace distflow
