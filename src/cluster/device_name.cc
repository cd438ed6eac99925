#include "cluster/device_name.h"

#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/status_macros.h"

namespace distflow {
namespace {

// Error-message form of user input: quoted, shortened if huge.
std::string Quote(absl::string_view s) {
  constexpr size_t kMax = 80;
  if (s.size() <= kMax) return absl::StrCat("'", s, "'");
  return absl::StrCat("'", s.substr(0, kMax), "...' (", s.size(), " chars)");
}

bool IsDecimal(absl::string_view s) {
  if (s.empty() || s.size() > 10) return false;
  for (char c : s) {
    if (!absl::ascii_isdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

// Parses a non-negative int or '*'. On '*' sets *has = false.
bool ParseIndex(absl::string_view s, bool* has, int* value) {
  if (s == "*") {
    *has = false;
    *value = 0;
    return true;
  }
  if (!IsDecimal(s) || !absl::SimpleAtoi(s, value) || *value < 0) return false;
  *has = true;
  return true;
}

// Records that a component was seen with canonical value `canon`; a second
// occurrence with a different value is an error.
struct Seen {
  bool seen = false;
  std::string canon;
};

absl::Status Record(Seen* seen, absl::string_view what, std::string canon, absl::string_view full) {
  if (seen->seen && seen->canon != canon) {
    return absl::InvalidArgumentError(absl::StrCat("device name ", Quote(full), ": conflicting ", what, " components '",
                                                   seen->canon, "' and '", canon, "'"));
  }
  seen->seen = true;
  seen->canon = std::move(canon);
  return absl::OkStatus();
}

std::string IndexString(bool has, int v) { return has ? absl::StrCat(v) : std::string("*"); }

}  // namespace

bool IsValidJobName(absl::string_view name) {
  if (name.empty() || !absl::ascii_isalpha(static_cast<unsigned char>(name[0]))) return false;
  for (char c : name) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  }
  return true;
}

absl::StatusOr<DeviceName> DeviceName::Parse(absl::string_view name) {
  DeviceName d;
  if (name.empty() || name == "/") return d;
  if (name[0] != '/') {
    return absl::InvalidArgumentError(absl::StrCat("device name ", Quote(name), " must start with '/'"));
  }
  Seen job, replica, task, device;
  const std::vector<absl::string_view> parts = absl::StrSplit(name.substr(1), '/');
  for (absl::string_view part : parts) {
    auto bad = [&](absl::string_view why) {
      return absl::InvalidArgumentError(
          absl::StrCat("device name ", Quote(name), ": bad component ", Quote(part), ": ", why));
    };
    if (part.empty()) return bad("empty component");
    const size_t colon = part.find(':');
    if (colon == absl::string_view::npos) {
      return bad("expected KEY:VALUE");
    }
    const absl::string_view key = part.substr(0, colon);
    const absl::string_view value = part.substr(colon + 1);
    if (key == "job") {
      if (value == "*") {
        d.has_job = false;
      } else if (!IsValidJobName(value)) {
        return bad("job name must match [A-Za-z][A-Za-z0-9_]*");
      } else {
        d.has_job = true;
        d.job = std::string(value);
      }
      RETURN_IF_ERROR(Record(&job, "job", std::string(value), name));
    } else if (key == "replica" || key == "task") {
      const bool is_task = key == "task";
      bool* has = is_task ? &d.has_task : &d.has_replica;
      int* v = is_task ? &d.task : &d.replica;
      if (!ParseIndex(value, has, v)) {
        return bad("expected a non-negative integer or '*'");
      }
      RETURN_IF_ERROR(Record(is_task ? &task : &replica, key, IndexString(*has, *v), name));
    } else if (key == "device" || key == "cpu" || key == "CPU" || key == "gpu" || key == "GPU") {
      absl::string_view type, id;
      bool has_id_part = true;
      if (key == "device") {
        const size_t c2 = value.find(':');
        type = value.substr(0, c2);
        if (c2 == absl::string_view::npos) {
          has_id_part = false;
        } else {
          id = value.substr(c2 + 1);
        }
      } else {
        type = key;
        id = value;
      }
      if (type == "*") {
        d.has_type = false;
        d.type.clear();
      } else if (IsValidJobName(type)) {
        d.has_type = true;
        d.type = absl::AsciiStrToUpper(type);
      } else {
        return bad("device type must match [A-Za-z][A-Za-z0-9_]* or '*'");
      }
      if (!has_id_part) {
        d.has_id = false;
        d.id = 0;
      } else if (!ParseIndex(id, &d.has_id, &d.id)) {
        return bad("device id must be a non-negative integer or '*'");
      }
      RETURN_IF_ERROR(
          Record(&device, "device", absl::StrCat(d.has_type ? d.type : "*", ":", IndexString(d.has_id, d.id)), name));
    } else {
      return bad("unknown key (expected job, replica, task, device, cpu or gpu)");
    }
  }
  return d;
}

std::string DeviceName::ToString() const {
  std::string out;
  if (has_job) absl::StrAppend(&out, "/job:", job);
  if (has_replica) absl::StrAppend(&out, "/replica:", replica);
  if (has_task) absl::StrAppend(&out, "/task:", task);
  if (has_type || has_id) {
    absl::StrAppend(&out, "/device:", has_type ? type : "*", ":", IndexString(has_id, id));
  }
  return out;
}

absl::Status DeviceName::MergeFrom(const DeviceName& other, bool allow_soft_placement) {
  auto conflict = [&](absl::string_view field) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot merge device names '", ToString(), "' and '", other.ToString(), "': conflicting ", field));
  };
  if (has_job && other.has_job && job != other.job) return conflict("job");
  if (has_replica && other.has_replica && replica != other.replica) return conflict("replica");
  if (has_task && other.has_task && task != other.task) return conflict("task");
  const bool type_conflict = has_type && other.has_type && type != other.type;
  const bool id_conflict = has_id && other.has_id && id != other.id;
  if (!allow_soft_placement) {
    if (type_conflict) return conflict("device type");
    if (id_conflict) return conflict("device id");
  }
  if (!has_job && other.has_job) {
    has_job = true;
    job = other.job;
  }
  if (!has_replica && other.has_replica) {
    has_replica = true;
    replica = other.replica;
  }
  if (!has_task && other.has_task) {
    has_task = true;
    task = other.task;
  }
  if (type_conflict) {  // soft placement: leave the device to the placer
    has_type = has_id = false;
    type.clear();
    id = 0;
    return absl::OkStatus();
  }
  if (!has_type && other.has_type) {
    has_type = true;
    type = other.type;
  }
  if (id_conflict) {
    has_id = false;
    id = 0;
  } else if (!has_id && other.has_id) {
    has_id = true;
    id = other.id;
  }
  return absl::OkStatus();
}

void DeviceName::SoftMergeFrom(const DeviceName& inner) {
  if (inner.has_job) {
    has_job = true;
    job = inner.job;
  }
  if (inner.has_replica) {
    has_replica = true;
    replica = inner.replica;
  }
  if (inner.has_task) {
    has_task = true;
    task = inner.task;
  }
  if (inner.has_type) {
    if (has_type && type != inner.type && !inner.has_id) {
      has_id = false;
      id = 0;
    }
    has_type = true;
    type = inner.type;
  }
  if (inner.has_id) {
    has_id = true;
    id = inner.id;
  }
}

DeviceName DeviceName::MergeInner(const DeviceName& outer, const DeviceName& inner) {
  DeviceName d = outer;
  d.SoftMergeFrom(inner);
  return d;
}

bool DeviceName::IsSpecificationOf(const DeviceName& full) const {
  if (has_job && (!full.has_job || job != full.job)) return false;
  if (has_replica && (!full.has_replica || replica != full.replica)) return false;
  if (has_task && (!full.has_task || task != full.task)) return false;
  if (has_type && (!full.has_type || type != full.type)) return false;
  if (has_id && (!full.has_id || id != full.id)) return false;
  return true;
}

bool DeviceName::IsCompatibleWith(const DeviceName& other) const {
  if (has_job && other.has_job && job != other.job) return false;
  if (has_replica && other.has_replica && replica != other.replica) return false;
  if (has_task && other.has_task && task != other.task) return false;
  if (has_type && other.has_type && type != other.type) return false;
  if (has_id && other.has_id && id != other.id) return false;
  return true;
}

bool DeviceName::IsFullySpecified() const { return has_job && has_replica && has_task && has_type && has_id; }

DeviceName DeviceName::AddressSpace() const {
  DeviceName d = *this;
  d.has_type = d.has_id = false;
  d.type.clear();
  d.id = 0;
  return d;
}

bool operator==(const DeviceName& a, const DeviceName& b) { return a.IsSpecificationOf(b) && b.IsSpecificationOf(a); }

}  // namespace distflow
