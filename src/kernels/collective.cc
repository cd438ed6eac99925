#include "kernels/collective.h"

#include <algorithm>
#include <map>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"

namespace distflow {
namespace {

struct Registry {
  absl::Mutex mu;
  std::map<const Device*, std::shared_ptr<CollectiveExecutor>> executors ABSL_GUARDED_BY(mu);
};

Registry& GlobalRegistry() {
  static Registry* r = new Registry();
  return *r;
}

}  // namespace

const char* CollectiveKindName(CollectiveKind k) {
  switch (k) {
    case CollectiveKind::kReduce:
      return "CollectiveReduce";
    case CollectiveKind::kBroadcastSend:
      return "CollectiveBcastSend";
    case CollectiveKind::kBroadcastRecv:
      return "CollectiveBcastRecv";
    case CollectiveKind::kGather:
      return "CollectiveGather";
  }
  return "Collective";
}

std::string DescribeCollective(const CollectiveParams& p) {
  if (p.group_size == 0) {
    return absl::StrCat(CollectiveKindName(p.kind), " '", p.node_name, "' (elastic group ", p.group_key, ", instance ",
                        p.instance_key, ")");
  }
  return absl::StrCat(CollectiveKindName(p.kind), " '", p.node_name, "' (", p.elastic ? "elastic " : "", "group ",
                      p.group_key, " of ", p.group_size, ", instance ", p.instance_key, ")");
}

absl::Status StepCancelledError(const std::string& what, const CancellationManager* cm) {
  const absl::Status reason = cm != nullptr ? cm->reason() : absl::OkStatus();
  if (reason.ok()) return absl::CancelledError(absl::StrCat(what, ": the step was cancelled"));
  return absl::Status(reason.code(), absl::StrCat(what, ": the step was cancelled: ", reason.message()));
}

absl::StatusOr<MergeOp> ParseMergeOp(const std::string& s) {
  if (s == "Add") return MergeOp::kAdd;
  if (s == "Mul") return MergeOp::kMul;
  if (s == "Max") return MergeOp::kMax;
  if (s == "Min") return MergeOp::kMin;
  if (s == "Adasum") return MergeOp::kAdasum;
  return absl::InvalidArgumentError(absl::StrCat("merge_op '", s, "' is not one of Add, Mul, Max, Min, Adasum"));
}

absl::StatusOr<FinalOp> ParseFinalOp(const std::string& s) {
  if (s == "Id") return FinalOp::kId;
  if (s == "Div") return FinalOp::kDiv;
  return absl::InvalidArgumentError(absl::StrCat("final_op '", s, "' is not one of Id, Div"));
}

absl::Status CheckGroupMembers(const CollectiveParams& p) {
  if (!p.member_tasks.empty()) {
    if (!p.members.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(DescribeCollective(p),
                                                     ": give group_members (task indices of the op's job) or "
                                                     "group_tasks (task names of any job), not both"));
    }
    if (p.group_size == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(DescribeCollective(p),
                       ": group_size 0 is the elastic group (the job's live tasks), "
                       "which takes no group_tasks; give group_size the number of tasks"));
    }
    if (static_cast<int>(p.member_tasks.size()) != p.group_size) {
      return absl::InvalidArgumentError(absl::StrCat(DescribeCollective(p), ": group_tasks lists ",
                                                     p.member_tasks.size(), " task(s) but group_size is ", p.group_size,
                                                     "; list every member of the group once"));
    }
    for (const std::string& t : p.member_tasks) {
      if (!absl::StartsWith(t, "/job:") || !absl::StrContains(t, "/task:")) {
        return absl::InvalidArgumentError(absl::StrCat(DescribeCollective(p), ": group_tasks has '", t,
                                                       "', which is not a task name; write /job:NAME/task:INDEX"));
      }
    }
    return absl::OkStatus();
  }
  if (p.members.empty()) return absl::OkStatus();
  if (p.group_size == 0 && !p.elastic) {
    return absl::InvalidArgumentError(absl::StrCat(DescribeCollective(p),
                                                   ": group_size 0 is the elastic group (the job's live tasks), "
                                                   "which takes no group_members; give group_size the number of "
                                                   "members for a process set"));
  }
  if (static_cast<int>(p.members.size()) != p.group_size) {
    return absl::InvalidArgumentError(absl::StrCat(DescribeCollective(p), ": group_members lists ", p.members.size(),
                                                   " task(s) but group_size is ", p.group_size,
                                                   "; list every member of the group once"));
  }
  std::set<int> seen;
  for (int m : p.members) {
    if (m < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(DescribeCollective(p), ": group_members has ", m, ", which is not a task index"));
    }
    if (!seen.insert(m).second) {
      return absl::InvalidArgumentError(
          absl::StrCat(DescribeCollective(p), ": group_members lists task ", m, " twice"));
    }
  }
  return absl::OkStatus();
}

std::vector<int> GroupMembers(const CollectiveParams& p) {
  if (!p.members.empty()) return p.members;
  std::vector<int> all(static_cast<size_t>(std::max(p.group_size, 0)));
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int>(i);
  return all;
}

void RegisterCollectiveExecutor(const Device* device, std::shared_ptr<CollectiveExecutor> executor) {
  Registry& r = GlobalRegistry();
  absl::MutexLock lock(&r.mu);
  r.executors[device] = std::move(executor);
}

void UnregisterCollectiveExecutor(const Device* device) {
  std::shared_ptr<CollectiveExecutor> gone;  // released outside the lock
  Registry& r = GlobalRegistry();
  absl::MutexLock lock(&r.mu);
  auto it = r.executors.find(device);
  if (it == r.executors.end()) return;
  gone = std::move(it->second);
  r.executors.erase(it);
}

std::shared_ptr<CollectiveExecutor> CollectiveExecutorFor(const Device* device) {
  Registry& r = GlobalRegistry();
  absl::MutexLock lock(&r.mu);
  auto it = r.executors.find(device);
  return it != r.executors.end() ? it->second : nullptr;
}

absl::StatusOr<Tensor> RunGroupOfOne(const CollectiveParams& params, const Tensor& input) {
  if (params.kind == CollectiveKind::kBroadcastRecv) {
    return absl::InvalidArgumentError(absl::StrCat(DescribeCollective(params),
                                                   ": a group of one has no other rank to receive a broadcast from; "
                                                   "give group_size the number of ranks, the sender included"));
  }
  // Merging with nothing and dividing by 1 leave the values as they are.
  return input.DeepCopy();
}

}  // namespace distflow
