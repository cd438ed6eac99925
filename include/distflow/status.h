// Errors: every distflow call that can fail returns an absl::Status or an
// absl::StatusOr<T>, whose message names the culprit (a node, a task, a file,
// a flag) and, where there is one, the fix. Debian's abseil has no macros to
// pass them on, so distflow provides two:
//
//   DF_RETURN_IF_ERROR(sess.Run(...).status());
//   DF_ASSIGN_OR_RETURN(std::vector<Tensor> out, sess.Run({loss}));
#pragma once

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define DF_CONCAT_IMPL(a, b) a##b
#define DF_CONCAT(a, b) DF_CONCAT_IMPL(a, b)

// Evaluates `expr` (an absl::Status); returns it from the enclosing function if not OK.
#define DF_RETURN_IF_ERROR(expr)             \
  do {                                       \
    ::absl::Status df_status_ = (expr);      \
    if (!df_status_.ok()) return df_status_; \
  } while (0)

// Evaluates `rexpr` (an absl::StatusOr<T>); on error returns its status, otherwise
// moves the value into `lhs`, which may be a declaration (`auto x`) or an lvalue.
#define DF_ASSIGN_OR_RETURN(lhs, rexpr) DF_ASSIGN_OR_RETURN_IMPL(DF_CONCAT(df_statusor_, __LINE__), lhs, rexpr)

#define DF_ASSIGN_OR_RETURN_IMPL(tmp, lhs, rexpr) \
  auto tmp = (rexpr);                             \
  if (!tmp.ok()) return std::move(tmp).status();  \
  lhs = std::move(tmp).value()
