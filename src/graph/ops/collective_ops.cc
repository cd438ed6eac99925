// Collective ops in TensorFlow's form (its collective_ops.cc): every rank of
// a group of `group_size` runs the same op with the same `group_key` and
// `instance_key`, and each gets the result. The group is tasks
// 0..group_size-1 of the job, or distflow's `group_members` (Horovod's
// process sets: those tasks, in rank order), or distflow's `group_tasks`
// (full task names of any jobs, in rank order). The executor behind the kernels
// (collective/) pairs the ranks' contributions; docs/COLLECTIVES.md says how.
//
//   CollectiveReduce     merge_op (Add, Mul, Max, Min; distflow's Adasum,
//                        collective/adasum.h) over the ranks'
//                        inputs, then final_op (Id, or Div by group_size);
//                        distflow's compression="fp16" makes a float
//                        reduction travel and round as fp16 (Horovod's
//                        Compression.fp16; collective/fp16_channel.h);
//                        distflow's fusion_cycle_ms > 0 (Horovod's cycle
//                        time) fuses it at run time with the reductions
//                        of its kind ready within one cycle, up to
//                        fusion_threshold_bytes (0: no limit), at once when
//                        fusion_set_size of them wait
//                        (collective/fusion_buffer.h)
//   CollectiveBcastSend  the sending rank: its input goes to every rank;
//                        with distflow's from_group_root=true every rank
//                        runs it and the group's root (the oldest rank,
//                        collective/collective_executor_impl.h) sends;
//                        with distflow's root_rank=k (k >= 0) every rank
//                        runs it and rank k of the group (of the run's
//                        build, for the elastic group) sends
//   CollectiveBcastRecv  every other rank: receives a tensor of `shape`
//   CollectiveGather     the ranks' inputs concatenated along dimension 0,
//                        in rank order (same dtype and dimensions after
//                        the first; the first may differ, as in Horovod's
//                        allgather)
//
// group_size 0 (distflow's) is the elastic group: every live task of the
// job, its size and ranks decided at run time at the job's coordinator
// (Horovod's hvd.elastic; Div divides by the size the run has). It takes
// no group_members.
#include <cstdint>
#include <limits>
#include <set>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "graph/attr_value.h"
#include "graph/op_def.h"
#include "graph/shape_inference.h"

namespace distflow {
namespace {

absl::Status CheckGroupSize(InferenceContext* c) {
  ASSIGN_OR_RETURN(int64_t n, GetAttrInt(c->node(), "group_size"));
  if (n < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("group_size must be at least 1 (or 0: the elastic group of the job's live tasks), got ", n));
  }
  // distflow's group_tasks (a group of tasks of any jobs): group_size task names.
  absl::StatusOr<std::vector<std::string>> tasks = GetAttrStringList(c->node(), "group_tasks");
  if (tasks.ok() && !tasks->empty()) {
    absl::StatusOr<std::vector<int64_t>> members = GetAttrIntList(c->node(), "group_members");
    if (members.ok() && !members->empty()) {
      return absl::InvalidArgumentError(
          "give group_members (task indices of the op's job) or group_tasks (task names of any job), not both");
    }
    if (n == 0) {
      return absl::InvalidArgumentError(
          "group_size 0 is the elastic group (the job's live tasks), which takes no group_tasks; give group_size "
          "the number of tasks");
    }
    if (static_cast<int64_t>(tasks->size()) != n) {
      return absl::InvalidArgumentError(absl::StrCat("group_tasks lists ", tasks->size(), " task(s) but group_size is ",
                                                     n, "; list every member of the group once"));
    }
    std::set<std::string> seen;
    for (const std::string& t : *tasks) {
      if (!absl::StartsWith(t, "/job:") || !absl::StrContains(t, "/task:")) {
        return absl::InvalidArgumentError(
            absl::StrCat("group_tasks has '", t, "', which is not a task name; write /job:NAME/task:INDEX"));
      }
      if (!seen.insert(t).second) return absl::InvalidArgumentError(absl::StrCat("group_tasks lists ", t, " twice"));
    }
    return absl::OkStatus();
  }
  // distflow's group_members (a process set): group_size distinct task indices.
  absl::StatusOr<std::vector<int64_t>> members = GetAttrIntList(c->node(), "group_members");
  if (members.ok() && !members->empty()) {
    if (n == 0) {
      return absl::InvalidArgumentError(
          "group_size 0 is the elastic group (the job's live tasks), which takes no group_members; give group_size "
          "the number of members for a process set");
    }
    if (static_cast<int64_t>(members->size()) != n) {
      return absl::InvalidArgumentError(absl::StrCat("group_members lists ", members->size(),
                                                     " task(s) but group_size is ", n,
                                                     "; list every member of the group once"));
    }
    std::set<int64_t> seen;
    for (int64_t m : *members) {
      if (m < 0 || m > std::numeric_limits<int32_t>::max()) {
        return absl::InvalidArgumentError(absl::StrCat("group_members has ", m, ", which is not a task index"));
      }
      if (!seen.insert(m).second) {
        return absl::InvalidArgumentError(absl::StrCat("group_members lists task ", m, " twice"));
      }
    }
  }
  return absl::OkStatus();
}

// merge_op and final_op as TensorFlow spells them.
absl::Status CheckReduceOps(InferenceContext* c) {
  ASSIGN_OR_RETURN(std::string merge, GetAttrString(c->node(), "merge_op"));
  ASSIGN_OR_RETURN(std::string final_op, GetAttrString(c->node(), "final_op"));
  if (merge != "Add" && merge != "Mul" && merge != "Max" && merge != "Min" && merge != "Adasum") {
    return absl::InvalidArgumentError(absl::StrCat("merge_op '", merge, "' is not one of Add, Mul, Max, Min, Adasum"));
  }
  if (merge == "Adasum") {
    absl::StatusOr<DataType> t = GetAttrType(c->node(), "T");
    if (t.ok() && *t != DT_FLOAT && *t != DT_DOUBLE) {
      return absl::InvalidArgumentError(
          absl::StrCat("merge_op Adasum reduces float32 and float64 tensors, not ", DataTypeName(*t)));
    }
  }
  if (final_op != "Id" && final_op != "Div") {
    return absl::InvalidArgumentError(absl::StrCat("final_op '", final_op, "' is not one of Id, Div"));
  }
  if (absl::StatusOr<std::string> compression = GetAttrString(c->node(), "compression");
      compression.ok() && *compression != "none" && *compression != "fp16") {
    return absl::InvalidArgumentError(absl::StrCat("compression '", *compression, "' is not one of none, fp16"));
  }
  return absl::OkStatus();
}

// Output 0 has the shape attribute (which must fit input 0, if any).
absl::Status ShapeAttrShape(InferenceContext* c) {
  RETURN_IF_ERROR(CheckGroupSize(c));
  ASSIGN_OR_RETURN(PartialShape shape, GetAttrShape(c->node(), "shape"));
  if (c->num_inputs() > 0) {
    absl::StatusOr<PartialShape> merged = c->input(0).Merge(shape);
    if (!merged.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("the input's shape ", c->input(0).DebugString(),
                                                     " does not fit the shape attribute ", shape.DebugString()));
    }
    c->set_output(0, *merged);
    return absl::OkStatus();
  }
  c->set_output(0, shape);
  return absl::OkStatus();
}

// CollectiveBcastSend's sender: the op's own rank (root_rank -1), rank
// root_rank of the group, or the group's root (from_group_root); a root_rank
// outside a fixed group is refused here, the elastic group's at run time.
absl::Status BcastSendShape(InferenceContext* c) {
  const int64_t root = GetAttrInt(c->node(), "root_rank").value_or(-1);
  const int64_t n = GetAttrInt(c->node(), "group_size").value_or(0);
  if (root < -1 || (n > 0 && root >= n)) {
    return absl::InvalidArgumentError(absl::StrCat("root_rank ", root, " is not a rank of the group of size ", n,
                                                   " (0..", n - 1, "; -1: this op's rank sends)"));
  }
  if (root >= 0 && GetAttrBool(c->node(), "from_group_root").value_or(false)) {
    return absl::InvalidArgumentError(
        absl::StrCat("root_rank ", root, " and from_group_root=true both name the sender; give one of them"));
  }
  return ShapeAttrShape(c);
}

// Dimension 0 is unknown (the ranks' sum); the others are the input's.
absl::Status GatherShape(InferenceContext* c) {
  RETURN_IF_ERROR(CheckGroupSize(c));
  const PartialShape& in = c->input(0);
  if (in.unknown_rank()) {
    c->set_output(0, PartialShape::Unknown());
    return absl::OkStatus();
  }
  if (in.rank() == 0)
    return absl::InvalidArgumentError("CollectiveGather needs an input of rank 1 or more, got a scalar");
  // Ranks may gather different numbers of rows (Horovod's allgather), so the
  // output's first dimension is known only for a group of one.
  const int64_t n = *GetAttrInt(c->node(), "group_size");
  PartialShape out = PartialShape::Scalar();
  out.AppendDim(n == 1 ? in.dim(0) : PartialShape::kUnknownDim);
  for (int i = 1; i < in.rank(); ++i) out.AppendDim(in.dim(i));
  c->set_output(0, out);
  return absl::OkStatus();
}

}  // namespace

void RegisterCollectiveOps(OpRegistry* r) {
  r->MustRegister(OpDefBuilder("CollectiveReduce")
                      .Input("input: T")
                      .Output("data: T")
                      .Attr("T: {float, double, int32, int64}")
                      .Attr("group_size: int >= 0")
                      .Attr("group_key: int")
                      .Attr("instance_key: int")
                      .Attr("merge_op: string")
                      .Attr("final_op: string")
                      .Attr("subdiv_offsets: list(int) = []")
                      .Attr("timeout_seconds: float = 0")
                      .Attr("compression: string = 'none'")
                      .Attr("group_members: list(int) = []")
                      .Attr("group_tasks: list(string) = []")
                      .Attr("fusion_cycle_ms: float = 0")
                      .Attr("fusion_threshold_bytes: int = 0")
                      .Attr("fusion_set_size: int = 0")
                      .SetIsStateful()
                      .SetShapeFn([](InferenceContext* c) {
                        RETURN_IF_ERROR(CheckGroupSize(c));
                        RETURN_IF_ERROR(CheckReduceOps(c));
                        return UnchangedShape(c);
                      }));
  r->MustRegister(OpDefBuilder("CollectiveBcastSend")
                      .Input("input: T")
                      .Output("data: T")
                      .Attr("T: {float, double, int32, int64}")
                      .Attr("group_size: int >= 0")
                      .Attr("group_key: int")
                      .Attr("instance_key: int")
                      .Attr("shape: shape")
                      .Attr("timeout_seconds: float = 0")
                      .Attr("from_group_root: bool = false")
                      .Attr("group_members: list(int) = []")
                      .Attr("group_tasks: list(string) = []")
                      .Attr("root_rank: int = -1")
                      .SetIsStateful()
                      .SetShapeFn(BcastSendShape));
  r->MustRegister(OpDefBuilder("CollectiveBcastRecv")
                      .Output("data: T")
                      .Attr("T: {float, double, int32, int64}")
                      .Attr("group_size: int >= 0")
                      .Attr("group_key: int")
                      .Attr("instance_key: int")
                      .Attr("shape: shape")
                      .Attr("timeout_seconds: float = 0")
                      .Attr("group_members: list(int) = []")
                      .Attr("group_tasks: list(string) = []")
                      .SetIsStateful()
                      .SetShapeFn(ShapeAttrShape));
  r->MustRegister(OpDefBuilder("CollectiveGather")
                      .Input("input: T")
                      .Output("data: T")
                      .Attr("T: {float, double, int32, int64}")
                      .Attr("group_size: int >= 0")
                      .Attr("group_key: int")
                      .Attr("instance_key: int")
                      .Attr("timeout_seconds: float = 0")
                      .Attr("group_members: list(int) = []")
                      .Attr("group_tasks: list(string) = []")
                      .SetIsStateful()
                      .SetShapeFn(GatherShape));
}

}  // namespace distflow
