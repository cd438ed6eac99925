#include "cluster/device_filters.h"

#include "absl/status/statusor.h"
#include "cluster/device_name.h"

namespace distflow {

bool PassesFilters(const std::string& task, const std::vector<std::string>& filters) {
  if (filters.empty()) return true;
  absl::StatusOr<DeviceName> t = DeviceName::Parse(task);
  for (const std::string& f : filters) {
    absl::StatusOr<DeviceName> d = DeviceName::Parse(f);
    if (t.ok() && d.ok() && d->AddressSpace().IsSpecificationOf(*t)) return true;
  }
  return false;
}

}  // namespace distflow
