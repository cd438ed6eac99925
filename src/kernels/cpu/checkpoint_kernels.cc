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

// Reads data files once each, for every variable of one restore.
class FileCache {
 public:
  // The tensor `name` of data file `path`, its crc verified.
  absl::StatusOr<const Tensor*> Get(const std::string& path, const std::string& name) {
    auto [it, fresh] = files_.try_emplace(path);
    File& f = it->second;
    if (fresh) {
      ASSIGN_OR_RETURN(std::string contents, Env::Default()->ReadFile(path));
      f.contents = std::move(contents);
      ASSIGN_OR_RETURN(checkpoint::ParsedShard shard, checkpoint::ParseShard(f.contents, path));
      f.shard = std::move(shard);
      for (const proto::CheckpointEntry& e : f.shard.footer.entry()) f.entries[e.name()] = &e;
    } else if (f.shard.path.empty()) {
      return absl::DataLossError(absl::StrCat("Checkpoint file '", path, "' could not be read"));
    }
    auto e = f.entries.find(name);
    if (e == f.entries.end()) {
      return absl::NotFoundError(absl::StrCat("Checkpoint file '", path, "' has no tensor '", name, "'"));
    }
    auto t = f.tensors.find(name);
    if (t == f.tensors.end()) {
      ASSIGN_OR_RETURN(Tensor value, checkpoint::ReadTensor(f.shard, *e->second));
      t = f.tensors.emplace(name, std::move(value)).first;
    }
    return &t->second;
  }
  // Drops the tensors read (whole ones move into variables instead).
  Tensor Take(const std::string& path, const std::string& name) {
    File& f = files_[path];
    Tensor t = std::move(f.tensors[name]);
    f.tensors.erase(name);
    return t;
  }

 private:
  struct File {
    std::string contents;
    checkpoint::ParsedShard shard;
    std::map<std::string, const proto::CheckpointEntry*> entries;
    std::map<std::string, Tensor> tensors;
  };
  std::map<std::string, File> files_;
};

class RestoreShardOp : public CheckpointKernel {
 public:
  using CheckpointKernel::CheckpointKernel;
  absl::Status Init(OpKernelConstruction* c) override {
    RETURN_IF_ERROR(CheckpointKernel::Init(c));
    absl::StatusOr<bool> plans = GetAttrBool(c->def(), "plans");
    plans_ = plans.ok() && *plans;  // graphs from before plans existed name files
    return absl::OkStatus();
  }
  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& files = ctx->input(0);
    if (files.dtype() != DT_STRING || files.NumElements() != static_cast<int64_t>(names_.size())) {
      return absl::InvalidArgumentError(absl::StrCat("RestoreShard: 'files' must hold ", names_.size(),
                                                     plans_ ? " restore plans" : " file names", ", one per variable"));
    }
    // Read and check every file first; set variables only once all is well.
    FileCache cache;
    std::vector<Tensor> values;
    for (size_t i = 0; i < names_.size(); ++i) {
      proto::RestorePlan plan;
      const std::string& element = files.flat<std::string>()[i];
      if (!plans_) {
        proto::RestorePlan::Piece* p = plan.add_piece();
        p->set_file(element);
        p->set_name(names_[i]);
      } else if (!plan.ParseFromString(element) || plan.piece_size() == 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("RestoreShard: the restore plan of variable '", names_[i], "' does not parse"));
      }
      ASSIGN_OR_RETURN(Tensor value, Fill(ctx->input_ref(static_cast<int>(i) + 1), names_[i], plan, &cache));
      values.push_back(std::move(value));
    }
    for (size_t i = 0; i < names_.size(); ++i) {
      Var* var = ctx->input_ref(static_cast<int>(i) + 1);
      absl::MutexLock lock(var->mu());
      var->Set(std::move(values[i]));
    }
    return absl::OkStatus();
  }

 private:
  // The value `plan` makes for variable `name`.
  static absl::StatusOr<Tensor> Fill(Var* var, const std::string& name, const proto::RestorePlan& plan,
                                     FileCache* cache) {
    const proto::RestorePlan::Piece& first = plan.piece(0);
    if (plan.piece_size() == 1 && first.size_size() == 0) {  // the whole tensor
      ASSIGN_OR_RETURN(const Tensor* value, cache->Get(first.file(), first.name()));
      if (value->dtype() != var->dtype() || !var->declared_shape().IsCompatibleWith(value->shape())) {
        return absl::InvalidArgumentError(absl::StrCat(
            "Cannot restore variable '", name, "' (", DataTypeName(var->dtype()), var->declared_shape().DebugString(),
            ") from '", first.file(), "', which holds ", DataTypeName(value->dtype()), value->shape().DebugString()));
      }
      return cache->Take(first.file(), first.name());
    }
    absl::StatusOr<TensorShape> shape = var->declared_shape().ToTensorShape();
    if (!shape.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("Cannot restore variable '", name, "' from slices: its shape ",
                                                     var->declared_shape().DebugString(), " is not fully defined"));
    }
    ASSIGN_OR_RETURN(Tensor allocated, Tensor::Allocate(var->dtype(), *shape));
    Tensor out = std::move(allocated);
    for (const proto::RestorePlan::Piece& p : plan.piece()) {
      ASSIGN_OR_RETURN(const Tensor* src, cache->Get(p.file(), p.name()));
      if (src->dtype() != var->dtype()) {
        return absl::InvalidArgumentError(absl::StrCat("Cannot restore variable '", name, "' (",
                                                       DataTypeName(var->dtype()), ") from '", p.name(), "' of '",
                                                       p.file(), "', which holds ", DataTypeName(src->dtype())));
      }
      absl::Status s = checkpoint::CopyBlock(static_cast<const char*>(src->raw_data()), src->shape().dim_sizes(),
                                             p.src_begin(), static_cast<char*>(out.raw_data()), shape->dim_sizes(),
                                             p.dst_begin(), p.size(), DataTypeSize(var->dtype()));
      if (!s.ok()) {
        return absl::InvalidArgumentError(absl::StrCat("Cannot restore variable '", name, "' from '", p.name(),
                                                       "' of '", p.file(), "': ", s.message()));
      }
    }
    return out;
  }

  bool plans_ = false;
};

}  // namespace

void RegisterCheckpointKernels(KernelRegistry* r) {
  r->Register<SaveShardOp>("SaveShard", kCpu, DT_INVALID);
  r->Register<RestoreShardOp>("RestoreShard", kCpu, DT_INVALID);
}

}  // namespace distflow
