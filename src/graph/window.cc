#include "graph/window.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "graph/attr_value.h"

namespace distflow {
namespace {

std::string IntsStr(const std::vector<int64_t>& v) { return absl::StrCat("[", absl::StrJoin(v, ","), "]"); }

// A 4-element NHWC list with 1 in the batch and depth dimensions and positive
// spatial values.
absl::Status CheckNhwcList(const std::vector<int64_t>& v, const char* name, const char* batch_depth_rule) {
  if (v.size() != 4) {
    return absl::InvalidArgumentError(absl::StrCat(name, " must have 4 elements (NHWC), got ", IntsStr(v)));
  }
  if (v[0] != 1 || v[3] != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(batch_depth_rule, " (", name, "[0] = ", name, "[3] = 1), got ", IntsStr(v)));
  }
  if (v[1] < 1 || v[2] < 1) {
    return absl::InvalidArgumentError(absl::StrCat(name, " must be positive, got ", IntsStr(v)));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<WindowAttrs> ReadWindowAttrs(const proto::NodeDef& node, bool pool) {
  WindowAttrs a;
  ASSIGN_OR_RETURN(std::vector<int64_t> strides, GetAttrIntList(node, "strides"));
  absl::Status s = CheckNhwcList(strides, "strides", "strides in the batch and depth dimensions must be 1");
  if (!s.ok()) return s;
  a.sh = strides[1];
  a.sw = strides[2];
  if (pool) {
    ASSIGN_OR_RETURN(std::vector<int64_t> ksize, GetAttrIntList(node, "ksize"));
    s = CheckNhwcList(ksize, "ksize", "pooling is not supported across the batch or depth dimensions");
    if (!s.ok()) return s;
    a.kh = ksize[1];
    a.kw = ksize[2];
  }
  ASSIGN_OR_RETURN(std::string padding, GetAttrString(node, "padding"));
  if (padding != "SAME" && padding != "VALID") {
    return absl::InvalidArgumentError(absl::StrCat("padding must be 'SAME' or 'VALID', got '", padding, "'"));
  }
  a.same = padding == "SAME";
  if (HasAttr(node, "data_format")) {
    ASSIGN_OR_RETURN(std::string fmt, GetAttrString(node, "data_format"));
    if (fmt != "NHWC") {
      return absl::InvalidArgumentError(
          absl::StrCat("data_format '", fmt, "' is not supported: only NHWC is implemented"));
    }
  }
  return a;
}

absl::StatusOr<WindowDim> ComputeWindow(int64_t in, int64_t k, int64_t s, bool same, absl::string_view what) {
  WindowDim d;
  if (same) {
    d.out = (in + s - 1) / s;
    const int64_t total = std::max<int64_t>((d.out - 1) * s + k - in, 0);
    d.pad_before = total / 2;
    d.pad_after = total - d.pad_before;
    return d;
  }
  if (in < k) {
    return absl::InvalidArgumentError(
        absl::StrCat("VALID padding: the ", what, " window (", k, ") is larger than the input (", in, ")"));
  }
  d.out = (in - k) / s + 1;
  return d;
}

}  // namespace distflow
