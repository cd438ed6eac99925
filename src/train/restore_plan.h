// How a Saver restores each of its variables from a checkpoint's index: a
// RestorePlan per variable naming the blocks of data-file tensors that fill
// it. A variable stored whole under its own name is one whole piece (the
// plain restore); a variable that is a slice of a larger one (a partitioned
// variable's shard), or a whole variable whose checkpoint holds it in
// slices, is filled from every block of its full variable that overlaps it,
// so a checkpoint saved with n shards restores into m. The plan is checked
// against the index before anything runs: dtypes, full shapes, and that the
// blocks cover every element exactly once.
//
// Free functions, no state: thread-safe.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "distflow/train/saver.h"
#include "proto/checkpoint.pb.h"

namespace distflow {

// One plan per variable of `vars`, in order, for the checkpoint at `prefix`
// whose index is `index`; FailedPrecondition listing every missing, extra
// (unless allow_extra) and mismatched variable, DataLoss if the checkpoint's
// blocks of a variable overlap.
absl::StatusOr<std::vector<proto::RestorePlan>> PlanRestore(const proto::CheckpointIndex& index,
                                                            const std::string& prefix,
                                                            const std::vector<Saver::VarInfo>& vars, bool allow_extra);

}  // namespace distflow
