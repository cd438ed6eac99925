// libFuzzer target for the text a user or a file hands to distflow-server:
// cluster specs (flag form and JSON, --cluster_spec / --cluster_config /
// DISTFLOW_CONFIG) and device names. Parsing must never crash; a parsed spec
// must print in both forms and parse back to the same spec, and a parsed
// device name must print canonically and parse back to the same name.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "cluster/device_name.h"
#include "distflow/cluster_spec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<distflow::ClusterSpec> spec = distflow::ClusterSpec::Parse(text);
  if (spec.ok()) {
    // The flag form cannot print sparse jobs (it says so); JSON prints every spec.
    absl::StatusOr<std::string> flag = spec->ToFlagString();
    for (const std::string& form : {flag.ok() ? *flag : std::string(), spec->ToJson()}) {
      if (form.empty()) continue;
      absl::StatusOr<distflow::ClusterSpec> back = distflow::ClusterSpec::Parse(form);
      if (!back.ok() || back->job_map() != spec->job_map()) std::abort();
    }
  }
  absl::StatusOr<distflow::DeviceName> name = distflow::DeviceName::Parse(text);
  if (name.ok()) {
    absl::StatusOr<distflow::DeviceName> back = distflow::DeviceName::Parse(name->ToString());
    if (!back.ok() || back->ToString() != name->ToString()) std::abort();
  }
  return 0;
}
