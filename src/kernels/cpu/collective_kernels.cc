// The collective kernels: CollectiveReduce, CollectiveBcastSend,
// CollectiveBcastRecv and CollectiveGather (graph/ops/collective_ops.cc).
// Each hands its input to its device's CollectiveExecutor
// (kernels/collective.h) and finishes when the group has; without an
// executor (a plain local session) only a group of one runs.
#include <algorithm>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "graph/attr_value.h"
#include "kernels/collective.h"
#include "kernels/device.h"
#include "kernels/kernel_registry.h"
#include "kernels/op_kernel.h"

namespace distflow {
namespace {

class CollectiveOp : public AsyncOpKernel {
 public:
  CollectiveOp(OpKernelConstruction* c, CollectiveKind kind) : AsyncOpKernel(c) { params_.kind = kind; }

  absl::Status Init(OpKernelConstruction* c) override {
    params_.node_name = c->def().name();
    ASSIGN_OR_RETURN(int64_t size, GetAttrInt(c->def(), "group_size"));
    ASSIGN_OR_RETURN(int64_t group, GetAttrInt(c->def(), "group_key"));
    ASSIGN_OR_RETURN(int64_t instance, GetAttrInt(c->def(), "instance_key"));
    ASSIGN_OR_RETURN(DataType dtype, GetAttrType(c->def(), "T"));
    params_.group_size = static_cast<int>(size);
    params_.group_key = group;
    params_.instance_key = instance;
    params_.dtype = dtype;
    if (absl::StatusOr<double> t = GetAttrFloat(c->def(), "timeout_seconds"); t.ok()) params_.timeout_seconds = *t;
    if (absl::StatusOr<std::vector<int64_t>> m = GetAttrIntList(c->def(), "group_members"); m.ok()) {
      for (int64_t task : *m) {
        params_.members.push_back(static_cast<int>(std::clamp<int64_t>(task, -1, std::numeric_limits<int>::max())));
      }
    }
    if (absl::StatusOr<std::vector<std::string>> t = GetAttrStringList(c->def(), "group_tasks"); t.ok()) {
      params_.member_tasks = *t;
    }
    if (params_.kind == CollectiveKind::kReduce) {
      ASSIGN_OR_RETURN(std::string merge, GetAttrString(c->def(), "merge_op"));
      ASSIGN_OR_RETURN(std::string final_op, GetAttrString(c->def(), "final_op"));
      ASSIGN_OR_RETURN(MergeOp m, ParseMergeOp(merge));
      ASSIGN_OR_RETURN(FinalOp f, ParseFinalOp(final_op));
      params_.merge_op = m;
      params_.final_op = f;
      if (absl::StatusOr<std::string> comp = GetAttrString(c->def(), "compression"); comp.ok()) {
        if (*comp != "none" && *comp != "fp16") {
          return absl::InvalidArgumentError(
              absl::StrCat(DescribeCollective(params_), ": compression '", *comp, "' is not one of none, fp16"));
        }
        params_.compress_fp16 = *comp == "fp16";
      }
      if (absl::StatusOr<double> cycle = GetAttrFloat(c->def(), "fusion_cycle_ms"); cycle.ok()) {
        params_.fusion_cycle_ms = *cycle;
      }
      if (absl::StatusOr<int64_t> t = GetAttrInt(c->def(), "fusion_threshold_bytes"); t.ok()) {
        params_.fusion_threshold_bytes = *t;
      }
      if (absl::StatusOr<int64_t> n = GetAttrInt(c->def(), "fusion_set_size"); n.ok()) params_.fusion_set_size = *n;
      if (params_.fusion_cycle_ms < 0 || params_.fusion_threshold_bytes < 0 || params_.fusion_set_size < 0) {
        return absl::InvalidArgumentError(absl::StrCat(DescribeCollective(params_),
                                                       ": fusion_cycle_ms, fusion_threshold_bytes and "
                                                       "fusion_set_size must be 0 or more, got ",
                                                       params_.fusion_cycle_ms, ", ", params_.fusion_threshold_bytes,
                                                       ", ", params_.fusion_set_size));
      }
    }
    if (params_.kind == CollectiveKind::kBroadcastSend) {
      if (absl::StatusOr<bool> root = GetAttrBool(c->def(), "from_group_root"); root.ok()) {
        params_.from_group_root = *root;
      }
      if (absl::StatusOr<int64_t> root = GetAttrInt(c->def(), "root_rank"); root.ok()) {
        if (*root < -1) {
          return absl::InvalidArgumentError(
              absl::StrCat(DescribeCollective(params_), ": root_rank must be a rank of the group or -1, got ", *root));
        }
        params_.root_rank = static_cast<int>(std::min<int64_t>(*root, std::numeric_limits<int>::max()));
      }
    }
    if (params_.kind == CollectiveKind::kBroadcastRecv || params_.kind == CollectiveKind::kBroadcastSend) {
      ASSIGN_OR_RETURN(PartialShape shape, GetAttrShape(c->def(), "shape"));
      absl::StatusOr<TensorShape> full = shape.ToTensorShape();
      if (!full.ok()) {
        return absl::InvalidArgumentError(absl::StrCat(DescribeCollective(params_),
                                                       ": its shape attribute must be "
                                                       "fully defined, got ",
                                                       shape.DebugString()));
      }
      params_.shape = *full;
    }
    if (params_.group_size < 0) {
      return absl::InvalidArgumentError(absl::StrCat(DescribeCollective(params_),
                                                     ": group_size must be at least 1 (or 0: the elastic group of "
                                                     "the job's live tasks), got ",
                                                     params_.group_size));
    }
    if (params_.kind == CollectiveKind::kReduce && params_.merge_op == MergeOp::kAdasum && params_.dtype != DT_FLOAT &&
        params_.dtype != DT_DOUBLE) {
      return absl::InvalidArgumentError(absl::StrCat(DescribeCollective(params_),
                                                     ": merge_op Adasum reduces float32 and float64 tensors, not ",
                                                     DataTypeName(params_.dtype)));
    }
    return CheckGroupMembers(params_);
  }

  void ComputeAsync(OpKernelContext* ctx, DoneCallback done) override {
    Tensor input = params_.kind == CollectiveKind::kBroadcastRecv ? Tensor() : ctx->input(0);
    if (params_.kind == CollectiveKind::kBroadcastSend && input.shape() != params_.shape) {
      done(absl::InvalidArgumentError(absl::StrCat(DescribeCollective(params_), ": its input has shape ",
                                                   input.shape().DebugString(), " but its shape attribute says ",
                                                   params_.shape.DebugString())));
      return;
    }
    std::shared_ptr<CollectiveExecutor> executor = CollectiveExecutorFor(ctx->device());
    if (executor == nullptr) {
      if (params_.group_size != 1) {
        done(absl::FailedPreconditionError(absl::StrCat(
            DescribeCollective(params_), " runs on ", ctx->device() != nullptr ? ctx->device()->name() : "no device",
            ", which has no collective executor: collectives between tasks run on a server's session "
            "(a grpc:// target); a local session runs only groups of size 1")));
        return;
      }
      absl::StatusOr<Tensor> out = RunGroupOfOne(params_, input);
      done(out.ok() ? ctx->set_output(0, std::move(*out)) : out.status());
      return;
    }
    const CollectiveParams* params = &params_;
    CollectiveParams traced;
    if (ctx->trace()) {
      traced = params_;
      traced.trace = ctx->trace();
      params = &traced;
    }
    executor->Run(*params, input, ctx->cancellation_manager(),
                  [ctx, done = std::move(done)](absl::StatusOr<Tensor> out) {
                    done(out.ok() ? ctx->set_output(0, std::move(*out)) : out.status());
                  });
  }

 private:
  CollectiveParams params_;
};

void RegisterKind(KernelRegistry* r, const char* op, CollectiveKind kind) {
  for (DataType dt : {DT_FLOAT, DT_DOUBLE, DT_INT32, DT_INT64}) {
    r->Register(op, kCpu, dt, [kind](OpKernelConstruction* c) -> std::unique_ptr<OpKernel> {
      return std::make_unique<CollectiveOp>(c, kind);
    });
  }
}

}  // namespace

void RegisterCollectiveKernels(KernelRegistry* r) {
  RegisterKind(r, "CollectiveReduce", CollectiveKind::kReduce);
  RegisterKind(r, "CollectiveBcastSend", CollectiveKind::kBroadcastSend);
  RegisterKind(r, "CollectiveBcastRecv", CollectiveKind::kBroadcastRecv);
  RegisterKind(r, "CollectiveGather", CollectiveKind::kGather);
}

}  // namespace distflow
