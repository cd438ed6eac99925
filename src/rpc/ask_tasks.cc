#include "rpc/ask_tasks.h"

#include "absl/strings/str_cat.h"

namespace distflow {

absl::Status FailedOnTasks(absl::string_view what, const std::vector<std::pair<std::string, absl::Status>>& failed,
                           size_t asked, absl::string_view others) {
  if (failed.empty()) return absl::OkStatus();
  std::string msg = absl::StrCat(what, " failed on ", failed.size(), " of ", asked, " task(s)");
  if (failed.size() < asked && !others.empty()) absl::StrAppend(&msg, " (", others, ")");
  absl::StrAppend(&msg, ":");
  for (size_t i = 0; i < failed.size(); ++i) {
    absl::StrAppend(&msg, i == 0 ? " " : "; ", failed[i].first, ": ", failed[i].second.message());
  }
  return absl::Status(failed.front().second.code(), msg);
}

}  // namespace distflow
