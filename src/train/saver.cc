#include "distflow/train/saver.h"

#include <algorithm>
#include <filesystem>
#include <map>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/env.h"
#include "base/logging.h"
#include "base/status_macros.h"
#include "client/graph_state.h"
#include "distflow/ops.h"
#include "google/protobuf/text_format.h"
#include "graph/attr_value.h"
#include "tensor/checkpoint_format.h"
#include "train/restore_plan.h"

namespace distflow {
namespace {

constexpr char kStateFile[] = "checkpoint";

std::string Absolute(const std::string& path) {
  std::error_code ec;
  std::filesystem::path p = std::filesystem::absolute(path, ec);
  return ec ? path : p.lexically_normal().string();
}

std::string Join(const std::string& dir, const std::string& name) {
  if (!name.empty() && name[0] == '/') return name;
  return absl::StrCat(dir, dir.empty() || dir.back() == '/' ? "" : "/", name);
}

std::string BaseName(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// Records `slice` on the saver's variable it names, after checking that
// the slice lies inside its full variable.
absl::Status AddSlice(const SaveSlice& slice, std::vector<Saver::VarInfo>* vars) {
  if (!slice.variable.ok()) return absl::InvalidArgumentError("SaverOptions::slices holds an invalid variable");
  const std::string name = slice.variable.node()->name();
  auto it = std::find_if(vars->begin(), vars->end(), [&](const Saver::VarInfo& v) { return v.name == name; });
  if (it == vars->end()) {
    return absl::InvalidArgumentError(
        absl::StrCat("SaverOptions::slices names '", name, "', which this Saver does not save"));
  }
  const std::string where = absl::StrCat(
      "SaverOptions::slices: variable '", name, "' ", it->shape.DebugString(), " as a slice of '", slice.full_name,
      "' [", absl::StrJoin(slice.full_shape, ","), "] at offset [", absl::StrJoin(slice.offset, ","), "]");
  if (slice.full_name.empty()) return absl::InvalidArgumentError(absl::StrCat(where, ": full_name is empty"));
  if (!it->shape.IsFullyDefined() || it->shape.rank() != static_cast<int>(slice.full_shape.size()) ||
      slice.offset.size() != slice.full_shape.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(where,
                     ": the variable's shape must be fully defined and of the full shape's rank, with one "
                     "offset per dimension"));
  }
  for (size_t d = 0; d < slice.offset.size(); ++d) {
    const int64_t n = it->shape.dim(static_cast<int>(d));
    if (slice.offset[d] < 0 || slice.full_shape[d] < 0 || slice.offset[d] > slice.full_shape[d] - n) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": the slice lies outside the full shape"));
    }
  }
  if (!it->full_name.empty()) return absl::InvalidArgumentError(absl::StrCat(where, ": given twice"));
  it->full_name = slice.full_name;
  it->full_shape = slice.full_shape;
  it->offset = slice.offset;
  return absl::OkStatus();
}

// The trailing "-<step>" of a checkpoint name, or -1.
int64_t StepOf(const std::string& name) {
  size_t dash = name.rfind('-');
  int64_t step;
  if (dash == std::string::npos || !absl::SimpleAtoi(name.substr(dash + 1), &step)) return -1;
  return step;
}

absl::StatusOr<proto::CheckpointState> ReadState(const std::string& logdir) {
  const std::string path = Join(logdir, kStateFile);
  ASSIGN_OR_RETURN(std::string text, Env::Default()->ReadFile(path));
  proto::CheckpointState state;
  if (!google::protobuf::TextFormat::ParseFromString(text, &state)) {
    return absl::DataLossError(absl::StrCat("Checkpoint state file '", path, "' does not parse"));
  }
  return state;
}

// Every file of the checkpoint named `name` in `logdir`, with the meta graph
// the Python Saver writes beside it.
std::vector<std::string> FilesOf(const std::string& logdir, const std::string& name) {
  std::vector<std::string> out;
  absl::StatusOr<std::vector<std::string>> all = Env::Default()->ListDir(logdir);
  if (!all.ok()) return out;
  for (const std::string& f : *all) {
    if (f == name + ".index" || f == name + ".meta" || absl::StartsWith(f, name + ".data-")) {
      out.push_back(Join(logdir, f));
    }
  }
  return out;
}

// An optimizer's slot of a slice ("emb/part_0/Adagrad", of the part's
// shape) is the same slice of the full variable's slot ("emb/Adagrad"), as
// TF's slot creator records, so slots re-partition with their variables.
void InheritSlices(std::vector<Saver::VarInfo>* vars) {
  absl::flat_hash_map<std::string, size_t> sliced;
  for (size_t i = 0; i < vars->size(); ++i) {
    if (!(*vars)[i].full_name.empty()) sliced[(*vars)[i].name] = i;
  }
  if (sliced.empty()) return;
  for (Saver::VarInfo& v : *vars) {
    const size_t slash = v.name.rfind('/');
    if (!v.full_name.empty() || slash == std::string::npos) continue;
    auto it = sliced.find(v.name.substr(0, slash));
    if (it == sliced.end()) continue;
    const Saver::VarInfo& base = (*vars)[it->second];
    if (!(v.shape == base.shape)) continue;
    v.full_name = absl::StrCat(base.full_name, v.name.substr(slash));
    v.full_shape = base.full_shape;
    v.offset = base.offset;
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<Saver>> Saver::Create(const Scope& scope, SaverOptions options) {
  if (options.max_to_keep < 0) return absl::InvalidArgumentError("SaverOptions::max_to_keep must be >= 0");
  if (options.basename.empty() || options.basename.find('/') != std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("SaverOptions::basename '", options.basename, "' must be a file name without '/'"));
  }
  RETURN_IF_ERROR(scope.status());
  auto saver = std::unique_ptr<Saver>(new Saver);
  saver->options_ = options;
  const std::shared_ptr<GraphState>& graph = scope.graph_state();
  std::vector<const Node*> nodes;
  if (options.var_list.empty()) {
    absl::MutexLock lock(&graph->mu);
    for (const auto& n : graph->graph.nodes()) {
      if (n->op() != "Variable") continue;
      // Local variables (VariableOptions::local) belong to one task: never saved.
      bool excluded = std::find(graph->local_variables.begin(), graph->local_variables.end(), n.get()) !=
                      graph->local_variables.end();
      for (const Output& e : options.exclude) excluded = excluded || e.node() == n.get();
      if (!excluded) nodes.push_back(n.get());
    }
  } else {
    for (const Output& v : options.var_list) {
      if (!v.ok() || v.node()->op() != "Variable") {
        return absl::InvalidArgumentError(absl::StrCat("Saver: '", v.name(), "' is not a variable"));
      }
      nodes.push_back(v.node());
    }
  }
  if (nodes.empty()) return absl::InvalidArgumentError("Saver: the graph has no variables to save");
  std::map<std::string, int> shard_of_device;
  for (const Node* n : nodes) {
    VarInfo v;
    v.name = n->name();
    v.dtype = n->output_type(0);
    v.shape = n->output_shape(0);
    for (const VarInfo& seen : saver->vars_) {
      if (seen.name == v.name)
        return absl::InvalidArgumentError(absl::StrCat("Saver: variable '", v.name, "' given twice"));
    }
    auto [it, fresh] = shard_of_device.try_emplace(n->def().device(), static_cast<int>(saver->shards_.size()));
    if (fresh) saver->shards_.emplace_back();
    saver->shards_[static_cast<size_t>(it->second)].vars.push_back(static_cast<int>(saver->vars_.size()));
    saver->vars_.push_back(std::move(v));
  }
  for (const SaveSlice& slice : options.slices) RETURN_IF_ERROR(AddSlice(slice, &saver->vars_));
  InheritSlices(&saver->vars_);
  Scope save = scope.WithNoControlDependencies().NewSubScope("save");
  for (auto& [device, index] : shard_of_device) {
    Shard& shard = saver->shards_[static_cast<size_t>(index)];
    Scope s = save.WithDevice(device);
    std::vector<Output> refs;
    std::vector<std::string> names;
    for (int v : shard.vars) {
      const Node* n = nodes[static_cast<size_t>(v)];
      refs.emplace_back(Operation(n, graph), 0, s);
      names.push_back(n->name());
    }
    auto set_names = [&](proto::NodeDef* def) { SetAttrStringList(def, "names", names); };
    auto set_restore_attrs = [&](proto::NodeDef* def) {
      SetAttrStringList(def, "names", names);
      SetAttrBool(def, "plans", true);
    };
    shard.save_path = ops::Placeholder(s.WithOpName(absl::StrCat("path_", index)), DT_STRING, PartialShape({}));
    std::vector<Output> save_inputs = {shard.save_path};
    save_inputs.insert(save_inputs.end(), refs.begin(), refs.end());
    Operation save_op = ops::Raw(s.WithOpName(absl::StrCat("SaveShard_", index)), "SaveShard", save_inputs, set_names);
    shard.save = Output(save_op, 0, s);
    shard.restore_files = ops::Placeholder(s.WithOpName(absl::StrCat("files_", index)), DT_STRING,
                                           PartialShape({static_cast<int64_t>(names.size())}));
    std::vector<Output> restore_inputs = {shard.restore_files};
    restore_inputs.insert(restore_inputs.end(), refs.begin(), refs.end());
    shard.restore =
        ops::Raw(s.WithOpName(absl::StrCat("RestoreShard_", index)), "RestoreShard", restore_inputs, set_restore_attrs);
  }
  RETURN_IF_ERROR(scope.status());
  return saver;
}

absl::StatusOr<std::string> Saver::Save(Session* session, const std::string& logdir, int64_t global_step) {
  return SaveAs(session, logdir, absl::StrCat(options_.basename, "-", global_step), global_step);
}

absl::StatusOr<std::string> Saver::SaveUnnumbered(Session* session, const std::string& logdir) {
  return SaveAs(session, logdir, options_.basename, 0);
}

absl::StatusOr<std::string> Saver::SaveAs(Session* session, const std::string& logdir_in, const std::string& name,
                                          int64_t global_step) {
  const std::string logdir = Absolute(logdir_in);
  Env* env = Env::Default();
  if (absl::Status s = env->CreateDir(logdir); !s.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("Cannot save a checkpoint in log directory '", logdir_in, "': ", s.message()));
  }
  const std::string prefix = Join(logdir, name);
  const int num_shards = static_cast<int>(shards_.size());
  FeedDict feeds;
  std::vector<Output> fetches;
  for (int i = 0; i < num_shards; ++i) {
    feeds.emplace_back(shards_[static_cast<size_t>(i)].save_path,
                       Tensor::Scalar<std::string>(checkpoint::DataFileName(prefix, i, num_shards)));
    fetches.push_back(shards_[static_cast<size_t>(i)].save);
  }
  absl::StatusOr<std::vector<Tensor>> footers = session->Run(feeds, fetches);
  auto fail = [&](const absl::Status& s) {
    for (int i = 0; i < num_shards; ++i) (void)env->DeleteFile(checkpoint::DataFileName(prefix, i, num_shards));
    return absl::Status(s.code(), absl::StrCat("Saving checkpoint '", prefix,
                                               "' failed (the previous checkpoint is "
                                               "still valid): ",
                                               s.message()));
  };
  if (!footers.ok()) return fail(footers.status());
  proto::CheckpointIndex index;
  index.set_format_version(checkpoint::kFormatVersion);
  index.set_num_shards(num_shards);
  index.set_global_step(global_step);
  absl::flat_hash_map<std::string, const VarInfo*> var_of;
  for (const VarInfo& v : vars_) var_of[v.name] = &v;
  for (int i = 0; i < num_shards; ++i) {
    proto::CheckpointShardFooter footer;
    if (!footer.ParseFromString((*footers)[static_cast<size_t>(i)].flat<std::string>()[0])) {
      return fail(absl::DataLossError(absl::StrCat("shard ", i, " returned a footer that does not parse")));
    }
    for (proto::CheckpointEntry& e : *footer.mutable_entry()) {
      e.set_shard(i);
      auto v = var_of.find(e.name());
      if (v != var_of.end() && !v->second->full_name.empty()) {
        proto::SaveSlice* slice = e.mutable_slice();
        slice->set_full_name(v->second->full_name);
        for (int64_t d : v->second->full_shape) slice->mutable_full_shape()->add_dim(d);
        for (int64_t o : v->second->offset) slice->add_offset(o);
      }
      *index.add_entry() = std::move(e);
    }
  }
  if (absl::Status s = env->WriteFileAtomically(checkpoint::IndexFileName(prefix), checkpoint::EncodeIndex(index));
      !s.ok()) {
    return fail(s);
  }
  if (absl::Status s = UpdateState(logdir, name); !s.ok()) {
    (void)env->DeleteFile(checkpoint::IndexFileName(prefix));
    return fail(s);
  }
  return prefix;
}

absl::Status Saver::UpdateState(const std::string& logdir, const std::string& name) {
  proto::CheckpointState state;
  absl::StatusOr<proto::CheckpointState> old = ReadState(logdir);
  if (old.ok()) {
    for (const std::string& p : old->all_model_checkpoint_paths()) {
      if (p != name) state.add_all_model_checkpoint_paths(p);
    }
  } else if (!absl::IsNotFound(old.status())) {
    LOG(WARNING) << old.status().message() << "; writing a new one";
  }
  state.add_all_model_checkpoint_paths(name);
  state.set_model_checkpoint_path(name);
  std::vector<std::string> dropped;
  if (options_.max_to_keep > 0) {
    auto* all = state.mutable_all_model_checkpoint_paths();
    while (all->size() > options_.max_to_keep) {
      dropped.push_back(all->Get(0));
      all->erase(all->begin());
    }
  }
  std::string text;
  google::protobuf::TextFormat::PrintToString(state, &text);
  RETURN_IF_ERROR(Env::Default()->WriteFileAtomically(Join(logdir, kStateFile), text));
  // Only now that the state no longer names them.
  for (const std::string& d : dropped) {
    if (d.empty() || d[0] == '/' || d.find("..") != std::string::npos) continue;  // never outside the directory
    for (const std::string& f : FilesOf(logdir, d)) (void)Env::Default()->DeleteFile(f);
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> Saver::CheckCompatible(const std::string& prefix) const {
  std::vector<proto::RestorePlan> plans;
  ASSIGN_OR_RETURN(proto::CheckpointIndex index, ReadCompatibleIndex(prefix, &plans));
  return index.global_step();
}

absl::StatusOr<proto::CheckpointIndex> Saver::ReadCompatibleIndex(const std::string& prefix,
                                                                  std::vector<proto::RestorePlan>* plans) const {
  const std::string path = checkpoint::IndexFileName(prefix);
  ASSIGN_OR_RETURN(std::string contents, Env::Default()->ReadFile(path));
  ASSIGN_OR_RETURN(proto::CheckpointIndex index, checkpoint::ParseIndex(contents, path));
  ASSIGN_OR_RETURN(*plans, PlanRestore(index, prefix, vars_, options_.allow_extra_in_checkpoint));
  return index;
}

absl::Status Saver::Restore(Session* session, const std::string& prefix_in) {
  const std::string prefix = Absolute(prefix_in);
  std::vector<proto::RestorePlan> plans;
  ASSIGN_OR_RETURN(proto::CheckpointIndex index, ReadCompatibleIndex(prefix, &plans));
  FeedDict feeds;
  std::vector<Operation> targets;
  for (const Shard& shard : shards_) {
    Tensor files(DT_STRING, TensorShape({static_cast<int64_t>(shard.vars.size())}));
    for (size_t i = 0; i < shard.vars.size(); ++i) {
      files.flat<std::string>()[i] = plans[static_cast<size_t>(shard.vars[i])].SerializeAsString();
    }
    feeds.emplace_back(shard.restore_files, std::move(files));
    targets.push_back(shard.restore);
  }
  absl::StatusOr<std::vector<Tensor>> r = session->Run(feeds, {}, targets);
  if (!r.ok()) {
    return absl::Status(r.status().code(),
                        absl::StrCat("Restoring checkpoint '", prefix, "' failed: ", r.status().message()));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> Saver::RestoreLatest(Session* session, const std::string& logdir) {
  ASSIGN_OR_RETURN(std::vector<std::string> history, CheckpointHistory(logdir));
  if (history.empty()) return absl::NotFoundError(absl::StrCat("No checkpoint in '", logdir, "'"));
  std::vector<std::string> skipped;
  for (auto it = history.rbegin(); it != history.rend(); ++it) {
    absl::Status s = Restore(session, *it);
    if (s.ok()) return *it;
    if (!absl::IsDataLoss(s) && !absl::IsNotFound(s)) return s;
    LOG(WARNING) << "Checkpoint '" << *it << "' is unusable, trying the one before it: " << s.message();
    skipped.push_back(BaseName(*it));
  }
  return absl::DataLossError(absl::StrCat("Every checkpoint in '", logdir, "' is damaged or incomplete (",
                                          absl::StrJoin(skipped, ", "),
                                          "); move them away to start afresh, or restore from a backup"));
}

absl::StatusOr<std::vector<std::string>> CheckpointHistory(const std::string& logdir_in) {
  const std::string logdir = Absolute(logdir_in);
  Env* env = Env::Default();
  std::vector<std::string> out;
  std::error_code ec;
  if (std::filesystem::exists(logdir, ec) && !std::filesystem::is_directory(logdir, ec)) {
    return absl::FailedPreconditionError(
        absl::StrCat("Log directory '", logdir_in, "' is a file, not a directory: name a directory for checkpoints"));
  }
  absl::StatusOr<proto::CheckpointState> state = ReadState(logdir);
  if (state.ok()) {
    for (const std::string& p : state->all_model_checkpoint_paths()) out.push_back(Join(logdir, p));
    if (out.empty() && !state->model_checkpoint_path().empty()) {
      out.push_back(Join(logdir, state->model_checkpoint_path()));
    }
    return out;
  }
  if (!absl::IsNotFound(state.status())) LOG(WARNING) << state.status().message() << "; looking for index files";
  if (!env->FileExists(logdir)) return out;
  ASSIGN_OR_RETURN(std::vector<std::string> files, env->ListDir(logdir));
  std::vector<std::pair<int64_t, std::string>> found;
  for (const std::string& f : files) {
    if (!absl::EndsWith(f, ".index")) continue;
    std::string name = f.substr(0, f.size() - 6);
    found.emplace_back(StepOf(name), Join(logdir, name));
  }
  std::sort(found.begin(), found.end());
  for (auto& [step, prefix] : found) out.push_back(std::move(prefix));
  return out;
}

absl::StatusOr<std::string> LatestCheckpoint(const std::string& logdir) {
  ASSIGN_OR_RETURN(std::vector<std::string> history, CheckpointHistory(logdir));
  if (history.empty()) return absl::NotFoundError(absl::StrCat("No checkpoint in '", logdir, "'"));
  return history.back();
}

absl::StatusOr<std::map<std::string, Tensor>> ReadCheckpointTensors(
    const std::string& prefix, const std::function<bool(const std::string&)>& want) {
  const std::string index_path = checkpoint::IndexFileName(prefix);
  ASSIGN_OR_RETURN(std::string index_contents, Env::Default()->ReadFile(index_path));
  ASSIGN_OR_RETURN(proto::CheckpointIndex index, checkpoint::ParseIndex(index_contents, index_path));
  std::map<std::string, Tensor> out;
  for (int shard = 0; shard < index.num_shards(); ++shard) {
    bool needed = false;
    for (const proto::CheckpointEntry& e : index.entry()) needed = needed || (e.shard() == shard && want(e.name()));
    if (!needed) continue;
    const std::string path = checkpoint::DataFileName(prefix, shard, index.num_shards());
    ASSIGN_OR_RETURN(std::string contents, Env::Default()->ReadFile(path));
    ASSIGN_OR_RETURN(checkpoint::ParsedShard parsed, checkpoint::ParseShard(contents, path));
    for (const proto::CheckpointEntry& e : parsed.footer.entry()) {
      if (!want(e.name())) continue;
      ASSIGN_OR_RETURN(Tensor t, checkpoint::ReadTensor(parsed, e));
      out[e.name()] = std::move(t);
    }
  }
  return out;
}

}  // namespace distflow
