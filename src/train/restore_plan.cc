#include "train/restore_plan.h"

#include <algorithm>
#include <map>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/types/span.h"
#include "tensor/checkpoint_format.h"

namespace distflow {
namespace {

// Where an entry lies in its full variable; an entry without a slice is
// the whole of the variable named by its name.
struct Block {
  const proto::CheckpointEntry* entry = nullptr;
  std::string full_name;
  std::vector<int64_t> full_shape, offset, shape;
};

Block BlockOf(const proto::CheckpointEntry& e) {
  Block b;
  b.entry = &e;
  b.shape.assign(e.shape().dim().begin(), e.shape().dim().end());
  if (e.has_slice()) {
    b.full_name = e.slice().full_name();
    b.full_shape.assign(e.slice().full_shape().dim().begin(), e.slice().full_shape().dim().end());
    b.offset.assign(e.slice().offset().begin(), e.slice().offset().end());
  } else {
    b.full_name = e.name();
    b.full_shape = b.shape;
    b.offset.assign(b.shape.size(), 0);
  }
  return b;
}

std::string Dims(const std::vector<int64_t>& d) { return absl::StrCat("[", absl::StrJoin(d, ","), "]"); }

// Elements shared by the boxes [a_off, a_off + a_shape) and [b_off, ...);
// `lo`/`hi` receive the intersection.
int64_t Overlap(const std::vector<int64_t>& a_off, const std::vector<int64_t>& a_shape,
                const std::vector<int64_t>& b_off, const std::vector<int64_t>& b_shape, std::vector<int64_t>* lo,
                std::vector<int64_t>* hi) {
  lo->assign(a_off.size(), 0);
  hi->assign(a_off.size(), 0);
  int64_t n = 1;
  for (size_t d = 0; d < a_off.size(); ++d) {
    (*lo)[d] = std::max(a_off[d], b_off[d]);
    (*hi)[d] = std::min(a_off[d] + a_shape[d], b_off[d] + b_shape[d]);
    if ((*hi)[d] <= (*lo)[d]) return 0;
    n *= (*hi)[d] - (*lo)[d];
  }
  return n;
}

int64_t Elements(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

}  // namespace

absl::StatusOr<std::vector<proto::RestorePlan>> PlanRestore(const proto::CheckpointIndex& index,
                                                            const std::string& prefix,
                                                            const std::vector<Saver::VarInfo>& vars, bool allow_extra) {
  absl::flat_hash_map<std::string, const proto::CheckpointEntry*> by_name;
  std::map<std::string, std::vector<Block>> by_full;
  for (const proto::CheckpointEntry& e : index.entry()) {
    by_name[e.name()] = &e;
    Block b = BlockOf(e);
    by_full[b.full_name].push_back(std::move(b));
  }
  auto file_of = [&](const proto::CheckpointEntry& e) {
    return checkpoint::DataFileName(prefix, e.shard(), index.num_shards());
  };
  std::vector<proto::RestorePlan> plans(vars.size());
  std::vector<std::string> missing, mismatched;
  absl::flat_hash_set<std::string> used_names, used_fulls, checked_fulls;
  for (size_t i = 0; i < vars.size(); ++i) {
    const Saver::VarInfo& v = vars[i];
    const std::string type = absl::StrCat(DataTypeName(v.dtype), v.shape.DebugString());
    const bool sliced = !v.full_name.empty();
    const std::string full = sliced ? v.full_name : v.name;
    // Stored as it is in the model: the plain restore.
    auto named = by_name.find(v.name);
    if (named != by_name.end()) {
      const Block b = BlockOf(*named->second);
      // A slice saved before checkpoints recorded slices is its own block
      // only if its shape still fits.
      const bool same_place =
          sliced ? (named->second->has_slice()
                        ? b.full_name == full && b.full_shape == v.full_shape && b.offset == v.offset &&
                              v.shape.IsCompatibleWith(PartialShape(absl::MakeConstSpan(b.shape)))
                        : v.shape.IsCompatibleWith(PartialShape(absl::MakeConstSpan(b.shape))))
                 : !named->second->has_slice();
      if (same_place) {
        used_names.insert(v.name);
        absl::StatusOr<TensorShape> shape = TensorShape::FromDims(b.shape);
        if (static_cast<int>(named->second->dtype()) != static_cast<int>(v.dtype) || !shape.ok() ||
            !v.shape.IsCompatibleWith(*shape)) {
          mismatched.push_back(absl::StrCat(v.name, ": the model has ", type, ", the checkpoint ",
                                            checkpoint::EntryTypeString(*named->second)));
          continue;
        }
        proto::RestorePlan::Piece* p = plans[i].add_piece();
        p->set_file(file_of(*named->second));
        p->set_name(v.name);
        continue;
      }
    }
    // Filled from the checkpoint's blocks of the full variable.
    auto group = by_full.find(full);
    if (group == by_full.end()) {
      missing.push_back(sliced ? absl::StrCat(v.name, " (", type, ", a slice of '", full, "' ", Dims(v.full_shape), ")")
                               : absl::StrCat(v.name, " (", type, ")"));
      continue;
    }
    used_fulls.insert(full);
    const std::vector<Block>& blocks = group->second;
    std::vector<int64_t> region_off = sliced ? v.offset : std::vector<int64_t>();
    std::vector<int64_t> region_shape(v.shape.dims().begin(), v.shape.dims().end());
    std::vector<int64_t> full_shape = v.full_shape;
    if (!sliced) {
      // A whole variable: its full shape is its own (unknown dims taken from the checkpoint).
      const std::vector<int64_t>& saved = blocks[0].full_shape;
      if (!v.shape.IsCompatibleWith(PartialShape(absl::MakeConstSpan(saved)))) {
        mismatched.push_back(absl::StrCat(v.name, ": the model has ", type, ", the checkpoint holds '", full,
                                          "' of shape ", Dims(saved), " in ", blocks.size(), " slices"));
        continue;
      }
      region_shape = saved;
      full_shape = saved;
      region_off.assign(saved.size(), 0);
    }
    bool ok = true;
    for (const Block& b : blocks) {
      if (b.full_shape != full_shape) {
        mismatched.push_back(absl::StrCat(v.name, ": a slice of '", full, "' of shape ", Dims(full_shape),
                                          " in the model, but the checkpoint's '", full, "' has shape ",
                                          Dims(b.full_shape), " (in '", b.entry->name(), "')"));
        ok = false;
        break;
      }
      if (static_cast<int>(b.entry->dtype()) != static_cast<int>(v.dtype)) {
        mismatched.push_back(absl::StrCat(v.name, ": the model has ", type, ", the checkpoint's '", full, "' is ",
                                          checkpoint::EntryTypeString(*b.entry)));
        ok = false;
        break;
      }
    }
    if (!ok) continue;
    if (checked_fulls.insert(full).second) {
      std::vector<int64_t> lo, hi;
      for (size_t a = 0; a < blocks.size(); ++a) {
        for (size_t c = a + 1; c < blocks.size(); ++c) {
          if (Overlap(blocks[a].offset, blocks[a].shape, blocks[c].offset, blocks[c].shape, &lo, &hi) > 0) {
            return absl::DataLossError(absl::StrCat("Checkpoint '", prefix, "': the slices '", blocks[a].entry->name(),
                                                    "' and '", blocks[c].entry->name(), "' of '", full,
                                                    "' overlap; the index is damaged"));
          }
        }
      }
    }
    int64_t covered = 0;
    for (const Block& b : blocks) {
      std::vector<int64_t> lo, hi;
      const int64_t n = Overlap(region_off, region_shape, b.offset, b.shape, &lo, &hi);
      if (n == 0) continue;
      covered += n;
      proto::RestorePlan::Piece* p = plans[i].add_piece();
      p->set_file(file_of(*b.entry));
      p->set_name(b.entry->name());
      for (size_t d = 0; d < lo.size(); ++d) {
        p->add_src_begin(lo[d] - b.offset[d]);
        p->add_dst_begin(lo[d] - region_off[d]);
        p->add_size(hi[d] - lo[d]);
      }
    }
    if (covered != Elements(region_shape)) {
      mismatched.push_back(absl::StrCat(v.name, ": the checkpoint's slices of '", full, "' cover ", covered, " of its ",
                                        Elements(region_shape), " elements"));
      plans[i].clear_piece();
      continue;
    }
    // An empty region still needs a plan the kernel recognises as sliced.
    if (plans[i].piece_size() == 0) {
      proto::RestorePlan::Piece* p = plans[i].add_piece();
      p->set_file(file_of(*blocks[0].entry));
      p->set_name(blocks[0].entry->name());
      for (size_t d = 0; d < region_shape.size(); ++d) {
        p->add_src_begin(0);
        p->add_dst_begin(0);
        p->add_size(0);
      }
    }
  }
  std::vector<std::string> extra;
  if (!allow_extra) {
    for (const proto::CheckpointEntry& e : index.entry()) {
      if (used_names.contains(e.name()) || used_fulls.contains(BlockOf(e).full_name)) continue;
      extra.push_back(absl::StrCat(e.name(), " (", checkpoint::EntryTypeString(e), ")"));
    }
  }
  if (missing.empty() && mismatched.empty() && extra.empty()) return plans;
  auto list = [](const std::vector<std::string>& v) {
    constexpr size_t kShown = 10;
    std::vector<std::string> shown(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(std::min(v.size(), kShown)));
    return absl::StrCat(absl::StrJoin(shown, ", "),
                        v.size() > kShown ? absl::StrCat(" and ", v.size() - kShown, " more") : "");
  };
  std::string msg = absl::StrCat("Checkpoint '", prefix, "' does not match this model:");
  if (!missing.empty()) absl::StrAppend(&msg, " missing from the checkpoint: ", list(missing), ";");
  if (!extra.empty()) absl::StrAppend(&msg, " in the checkpoint but not in the model: ", list(extra), ";");
  if (!mismatched.empty()) absl::StrAppend(&msg, " different dtype or shape: ", list(mismatched), ";");
  absl::StrAppend(&msg, " is the log directory from another model? Use a new log directory, or start afresh");
  return absl::FailedPreconditionError(msg);
}

}  // namespace distflow
