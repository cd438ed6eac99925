// DeviceName: a parsed (possibly partial) device specification such as
// "/job:ps/replica:0/task:1/device:CPU:0", as used by device placement, the
// placer's `tf.device` scopes and the distributed runtime's task addressing.
//
// Grammar (every component optional, in any order, each starting with '/'):
//   /job:NAME            NAME matches [A-Za-z][A-Za-z0-9_]*, or '*' (unset)
//   /replica:N           N a non-negative decimal int, or '*' (unset)
//   /task:N              as replica
//   /device:TYPE[:ID]    TYPE matches [A-Za-z][A-Za-z0-9_]* (stored upper-cased)
//                        or '*'; ID a non-negative int or '*'; no ID = unset
//   /cpu:ID /CPU:ID /gpu:ID /GPU:ID   legacy forms of /device:CPU:ID etc.
// "" and "/" are the fully unspecified name. A component may repeat only with
// the same value ("/task:1/task:1" is fine, "/task:1/task:2" is an error).
//
// Example (a tf.device-style scope resolved against a task's default device):
//   ASSIGN_OR_RETURN(DeviceName requested, DeviceName::Parse("/job:ps/cpu:0"));
//   DeviceName scoped = DeviceName::MergeInner(outer_scope, requested);
//   if (scoped.IsSpecificationOf(candidate)) { /* candidate may host it */ }
//
// Thread-safety: DeviceName is a plain value type (thread-compatible): const
// methods may run concurrently; mutation needs external synchronisation.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace distflow {

// True if `name` matches [A-Za-z][A-Za-z0-9_]* (valid job names; shared with
// ClusterSpec).
bool IsValidJobName(absl::string_view name);

struct DeviceName {
  bool has_job = false;
  std::string job;
  bool has_replica = false;
  int replica = 0;
  bool has_task = false;
  int task = 0;
  bool has_type = false;
  std::string type;  // upper-case, e.g. "CPU", "GPU"
  bool has_id = false;
  int id = 0;

  // Parses `name` per the grammar above. InvalidArgument names the whole
  // string and the offending component.
  static absl::StatusOr<DeviceName> Parse(absl::string_view name);

  // Canonical form "/job:ps/replica:0/task:1/device:CPU:0"; unset job,
  // replica and task are omitted; the device part is "/device:CPU:0",
  // "/device:CPU:*" (type only), "/device:*:0" (id only) or omitted (neither).
  // The fully unspecified name prints as "". Parse(ToString()) == *this.
  std::string ToString() const;

  // Strict merge: every field set in `other` but unset here is copied in. A
  // field set in both with different values is InvalidArgument naming both
  // names and the field; *this is left unchanged on error.
  //
  // With allow_soft_placement (TF's MergeDevNames semantics): a conflict in
  // the device type clears both type and id here, a conflict in the id only
  // clears the id (leaving the placer free to choose); job/replica/task
  // conflicts are still errors.
  absl::Status MergeFrom(const DeviceName& other, bool allow_soft_placement = false);

  // Device-scope merge (`with device(outer): with device(inner):`): every
  // field set in `inner` overrides the one here; fields unset in `inner` keep
  // their value here. One extra rule: if `inner` sets a type different from
  // ours but no id, our id is dropped (an id only means something with its
  // type). Never fails.
  void SoftMergeFrom(const DeviceName& inner);
  // Returns `outer` with SoftMergeFrom(inner) applied.
  static DeviceName MergeInner(const DeviceName& outer, const DeviceName& inner);

  // True if every field set here is also set in `full` with the same value
  // (unset fields, i.e. wildcards, match anything). "" matches every device.
  bool IsSpecificationOf(const DeviceName& full) const;
  bool Matches(const DeviceName& full) const { return IsSpecificationOf(full); }

  // True if no field is set in both with different values (a device exists
  // that both could name).
  bool IsCompatibleWith(const DeviceName& other) const;

  // All five fields set.
  bool IsFullySpecified() const;

  // Only the job/replica/task part (the address space of the hosting task).
  DeviceName AddressSpace() const;

  friend bool operator==(const DeviceName& a, const DeviceName& b);
  friend bool operator!=(const DeviceName& a, const DeviceName& b) { return !(a == b); }
};

}  // namespace distflow
