// Kernels for SaveShard and RestoreShard (graph/ops/checkpoint_ops.cc). They
// run on the task that holds the variables and read and write that task's
// files through Env; file formats in tensor/checkpoint_format.h.
#include <map>

#include "absl/strings/str_cat.h"
#include "base/env.h"
#include "base/status_macros.h"
#include "graph/attr_value.h"
#include "kernels/kernel_registry.h"
#include "kernels/resource_mgr.h"
#include "tensor/checkpoint_format.h"

namespace distflow {
namespace {

std::string DirName(const std::string& path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

class CheckpointKernel : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Init(OpKernelConstruction* c) override {
    ASSIGN_OR_RETURN(std::vector<std::string> names, GetAttrStringList(c->def(), "names"));
    names_ = std::move(names);
    if (static_cast<int>(names_.size()) != c->num_inputs() - 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("has ", names_.size(), " names for ", c->num_inputs() - 1, " variables"));
    }
    return absl::OkStatus();
  }
  // File work never runs inline on an RPC thread.
  int64_t EstimatedWork(const std::vector<TensorShape>&) const override { return -1; }

 protected:
  std::vector<std::string> names_;
};

class SaveShardOp : public CheckpointKernel {
 public:
  using CheckpointKernel::CheckpointKernel;
  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& path_t = ctx->input(0);
    if (path_t.dtype() != DT_STRING || path_t.NumElements() != 1) {
      return absl::InvalidArgumentError("SaveShard: 'path' must be one string");
    }
    const std::string path = path_t.flat<std::string>()[0];
    std::vector<std::pair<std::string, Tensor>> tensors;
    for (size_t i = 0; i < names_.size(); ++i) {
      absl::StatusOr<Tensor> value = ctx->input_ref(static_cast<int>(i) + 1)->Read();
      if (!value.ok()) {
        return absl::FailedPreconditionError(
            absl::StrCat("Cannot save variable '", names_[i], "': ", value.status().message()));
      }
      tensors.emplace_back(names_[i], std::move(*value));
    }
    proto::CheckpointShardFooter footer;
    // Written from the variables' own memory: no copy of them is made.
    ASSIGN_OR_RETURN(checkpoint::EncodedShard contents, checkpoint::EncodeShardPieces(tensors, &footer));
    Env* env = Env::Default();
    if (absl::Status s = env->CreateDir(DirName(path)); !s.ok()) return s;
    if (absl::Status s = env->WriteFileAtomically(path, contents.Pieces()); !s.ok()) {
      return absl::Status(s.code(), absl::StrCat("Saving checkpoint data: ", s.message()));
    }
    ASSIGN_OR_RETURN(Tensor * out, ctx->allocate_output(0, TensorShape()));
    out->flat<std::string>()[0] = footer.SerializeAsString();
    return absl::OkStatus();
  }
};

class RestoreShardOp : public CheckpointKernel {
 public:
  using CheckpointKernel::CheckpointKernel;
  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& files = ctx->input(0);
    if (files.dtype() != DT_STRING || files.NumElements() != static_cast<int64_t>(names_.size())) {
      return absl::InvalidArgumentError(
          absl::StrCat("RestoreShard: 'files' must hold ", names_.size(), " file names, one per variable"));
    }
    // Read and check every file first; set variables only once all is well.
    struct File {
      std::string contents;
      checkpoint::ParsedShard shard;
      std::map<std::string, const proto::CheckpointEntry*> entries;
    };
    std::map<std::string, File> opened;
    std::vector<Tensor> values;
    for (size_t i = 0; i < names_.size(); ++i) {
      const std::string& path = files.flat<std::string>()[i];
      auto [it, fresh] = opened.try_emplace(path);
      File& f = it->second;
      if (fresh) {
        ASSIGN_OR_RETURN(std::string contents, Env::Default()->ReadFile(path));
        f.contents = std::move(contents);
        ASSIGN_OR_RETURN(checkpoint::ParsedShard shard, checkpoint::ParseShard(f.contents, path));
        f.shard = std::move(shard);
        for (const proto::CheckpointEntry& e : f.shard.footer.entry()) f.entries[e.name()] = &e;
      }
      auto e = f.entries.find(names_[i]);
      if (e == f.entries.end()) {
        return absl::NotFoundError(absl::StrCat("Checkpoint file '", path, "' has no tensor '", names_[i], "'"));
      }
      Var* var = ctx->input_ref(static_cast<int>(i) + 1);
      ASSIGN_OR_RETURN(Tensor value, checkpoint::ReadTensor(f.shard, *e->second));
      if (value.dtype() != var->dtype() || !var->declared_shape().IsCompatibleWith(value.shape())) {
        return absl::InvalidArgumentError(absl::StrCat("Cannot restore variable '", names_[i], "' (",
                                                       DataTypeName(var->dtype()), var->declared_shape().DebugString(),
                                                       ") from '", path, "', which holds ",
                                                       checkpoint::EntryTypeString(*e->second)));
      }
      values.push_back(std::move(value));
    }
    for (size_t i = 0; i < names_.size(); ++i) {
      Var* var = ctx->input_ref(static_cast<int>(i) + 1);
      absl::MutexLock lock(var->mu());
      var->Set(std::move(values[i]));
    }
    return absl::OkStatus();
  }
};

}  // namespace

void RegisterCheckpointKernels(KernelRegistry* r) {
  r->Register<SaveShardOp>("SaveShard", kCpu, DT_INVALID);
  r->Register<RestoreShardOp>("RestoreShard", kCpu, DT_INVALID);
}

}  // namespace distflow
