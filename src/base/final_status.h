// A mark on an error that no retry can change, whatever its code. A server of
// this process that has stopped answers Unavailable, as any server that is
// gone does (callers that look only at the code see a server that is down),
// but a loop that retries Unavailable while it waits for its cluster would
// then wait for nothing until its deadline: it asks IsFinal first.
//
// The mark is a status payload, so it travels with copies of the status
// inside this process (not across gRPC, and not into a status rebuilt from
// the code and message). Free functions; thread-safe as absl::Status is.
#pragma once

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/cord.h"
#include "absl/strings/string_view.h"

namespace distflow {

inline constexpr absl::string_view kFinalStatusPayload = "distflow.final";

// `s` marked final; an OK status stays OK.
inline absl::Status MarkFinal(absl::Status s) {
  if (!s.ok()) s.SetPayload(kFinalStatusPayload, absl::Cord("retrying cannot help"));
  return s;
}

inline bool IsFinal(const absl::Status& s) { return !s.ok() && s.GetPayload(kFinalStatusPayload).has_value(); }

// `s` with `message`, keeping its code and its final mark.
inline absl::Status WithMessage(const absl::Status& s, absl::string_view message) {
  absl::Status out(s.code(), message);
  return IsFinal(s) ? MarkFinal(std::move(out)) : out;
}

}  // namespace distflow
