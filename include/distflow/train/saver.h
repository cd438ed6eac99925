// Saver: checkpoints of a model's variables, written and read by the tasks
// that hold them.
//
//   auto saver = Saver::Create(root).value();      // after the model is built
//   saver->Save(&sess, "train_logs", step);         // train_logs/model.ckpt-<step>
//   saver->RestoreLatest(&sess, "train_logs");      // the newest usable one
//
// Create adds, for every device that holds variables (a ps task, or the
// local CPU), a SaveShard and a RestoreShard op that take that device's
// variables by reference, so the placer runs them beside the variables:
// each task writes its own data file, and no variable travels to the client.
// A checkpoint with prefix P is P.data-0000i-of-0000N (one per device) and
// P.index (dtype, shape, shard, offset and crc32c of every tensor), written
// by the client after the data files. Every file is written under a
// temporary name, fsynced and renamed; the log directory's `checkpoint` file
// (paths relative to the directory) is updated the same way, last, so a save
// that fails half way (a full disk, a task that died) leaves the previous
// checkpoint valid. Older checkpoints beyond max_to_keep are then deleted.
//
// Variables named in SaverOptions::slices are saved with their place in
// the full variable (the index entry's `slice`), and restore by blocks: each
// variable is filled from the checkpoint's blocks of its full variable, on
// its own task, whatever the number of shards the checkpoint was saved with.
// Checkpoints written before slices existed restore as before.
//
// Restore checks the index against the model before touching a variable: a
// checkpoint from another model is a FailedPrecondition listing every
// missing, extra and mismatched variable by name, dtype and shape. A damaged
// file is DataLoss naming it; RestoreLatest then falls back to the previous
// checkpoint with a warning. Within one task a restore is all or nothing.
//
// The data files are written on the tasks' file systems and the index and
// state on the client's: a cluster spanning machines needs a log directory
// on a shared file system, as TensorFlow's did.
//
// Not thread-safe: one thread saves or restores at a time (the Supervisor's).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "distflow/export.h"
#include "distflow/partial_shape.h"
#include "distflow/scope.h"
#include "distflow/session.h"

namespace distflow {

namespace proto {
class CheckpointIndex;
class RestorePlan;
}  // namespace proto

// A variable that is one block of a larger one (a partitioned variable's
// shard; TF's save_slice_info): `variable` holds the block of the variable
// `full_name` (of shape `full_shape`) that starts at `offset` (one per
// dimension) and has `variable`'s own shape.
struct DISTFLOW_EXPORT SaveSlice {
  Output variable;
  std::string full_name;
  std::vector<int64_t> full_shape;
  std::vector<int64_t> offset;
};

struct DISTFLOW_EXPORT SaverOptions {
  // Variables to save; empty: every variable in the graph when Create runs
  // but the local ones (VariableOptions::local).
  std::vector<Output> var_list;
  // More variables an empty var_list leaves out (TensorFlow's local
  // variables: metrics' counters, which belong to one task and are never
  // saved).
  std::vector<Output> exclude;
  // How many checkpoints the log directory keeps (older ones are deleted);
  // 0 keeps all.
  int max_to_keep = 5;
  // Checkpoint names are "<basename>-<global step>".
  std::string basename = "model.ckpt";
  // Restore accepts a checkpoint that holds more variables than this saver
  // restores (as TF's Saver(var_list) does); missing or mismatched ones are
  // still errors. The Python client uses it to restore a partitioned
  // variable's parts itself when their number changed.
  bool allow_extra_in_checkpoint = false;
  // Variables saved as slices of larger ones. Restore fills each variable
  // from whatever blocks of its full variable the checkpoint holds, so a
  // checkpoint saved with n shards restores into m shards, or into one
  // unpartitioned variable named `full_name`, and back. A variable named
  // "<slice>/<slot>" of the slice's shape (an optimizer's slot, e.g.
  // "emb/part_0/Adagrad") is saved as the same slice of "<full_name>/<slot>".
  std::vector<SaveSlice> slices;
};

class DISTFLOW_EXPORT Saver {
 public:
  struct VarInfo {
    std::string name;  // the variable's node name: its key in checkpoints
    DataType dtype = DT_INVALID;
    PartialShape shape;
    // Empty unless the variable is a slice: then the full variable's name,
    // shape, and this slice's offset in it.
    std::string full_name;
    std::vector<int64_t> full_shape;
    std::vector<int64_t> offset;
  };

  static absl::StatusOr<std::unique_ptr<Saver>> Create(const Scope& scope, SaverOptions options = {});

  // Writes <logdir>/<basename>-<global_step>; returns its prefix (absolute).
  absl::StatusOr<std::string> Save(Session* session, const std::string& logdir, int64_t global_step);
  // Writes <logdir>/<basename> with no step in its name (TensorFlow's
  // Saver.save without global_step); its index records step 0.
  absl::StatusOr<std::string> SaveUnnumbered(Session* session, const std::string& logdir);
  // Restores every variable from the checkpoint at `prefix`.
  absl::Status Restore(Session* session, const std::string& prefix);
  // Restores the newest usable checkpoint of `logdir` and returns its prefix;
  // NotFound if the directory holds none. A damaged or missing checkpoint is
  // skipped with a warning naming it; a checkpoint of another model is an
  // error, not skipped.
  absl::StatusOr<std::string> RestoreLatest(Session* session, const std::string& logdir);

  // Checks the checkpoint at `prefix` against this saver's variables without
  // running anything; returns its global step.
  absl::StatusOr<int64_t> CheckCompatible(const std::string& prefix) const;

  const std::vector<VarInfo>& variables() const { return vars_; }

 private:
  struct Shard {
    std::vector<int> vars;  // indices into vars_
    Output save_path;       // Placeholder: the data file SaveShard writes
    Output save;            // SaveShard: its footer
    Output restore_files;   // Placeholder: one data file per variable
    Operation restore;      // RestoreShard
  };
  Saver() = default;
  // The index at `prefix`, read once and checked against vars_, and how to
  // restore each of vars_ from it.
  absl::StatusOr<proto::CheckpointIndex> ReadCompatibleIndex(const std::string& prefix,
                                                             std::vector<proto::RestorePlan>* plans) const;
  absl::Status UpdateState(const std::string& logdir, const std::string& name);
  absl::StatusOr<std::string> SaveAs(Session* session, const std::string& logdir_in, const std::string& name,
                                     int64_t global_step);

  SaverOptions options_;
  std::vector<VarInfo> vars_;
  std::vector<Shard> shards_;
};

// The prefixes (absolute) of the checkpoints of `logdir`, oldest first, from
// its `checkpoint` file, or, if that file is missing or damaged, from the
// index files in the directory ordered by global step. Empty if none.
DISTFLOW_EXPORT absl::StatusOr<std::vector<std::string>> CheckpointHistory(const std::string& logdir);
// The newest of them; NotFound if there is none.
DISTFLOW_EXPORT absl::StatusOr<std::string> LatestCheckpoint(const std::string& logdir);

// The tensors of checkpoint `prefix` whose names `want` accepts, by name
// (TF's checkpoint reader). Errors name the file that is missing or corrupt.
DISTFLOW_EXPORT absl::StatusOr<std::map<std::string, Tensor>> ReadCheckpointTensors(
    const std::string& prefix, const std::function<bool(const std::string&)>& want);

}  // namespace distflow
