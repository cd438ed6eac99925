#include "kernels/kernel_registry.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "graph/attr_value.h"
#include "kernels/cpu/all_kernels.h"
#include "kernels/device.h"

namespace distflow {

KernelRegistry* KernelRegistry::Global() {
  static KernelRegistry* registry = [] {
    auto* r = new KernelRegistry;
    RegisterAllCpuKernels(r);
    return r;
  }();
  return registry;
}

void KernelRegistry::Register(const std::string& op, const std::string& device_type, DataType type,
                              KernelFactory factory, const std::string& type_attr) {
  absl::MutexLock lock(&mu_);
  kernels_[{op, device_type}].push_back({type, type_attr, std::move(factory)});
}

bool KernelRegistry::HasKernel(const std::string& op, const std::string& device_type) const {
  absl::MutexLock lock(&mu_);
  return kernels_.count({op, device_type}) > 0;
}

absl::StatusOr<std::unique_ptr<OpKernel>> KernelRegistry::CreateKernel(const Node& node, Device* device) const {
  std::vector<DataType> in, out;
  for (int i = 0; i < node.num_inputs(); ++i) in.push_back(node.input_type(i));
  for (int i = 0; i < node.num_outputs(); ++i) out.push_back(node.output_type(i));
  return CreateKernel(node.def(), in, out, device);
}

absl::StatusOr<std::unique_ptr<OpKernel>> KernelRegistry::CreateKernel(const proto::NodeDef& def,
                                                                       const std::vector<DataType>& input_types,
                                                                       const std::vector<DataType>& output_types,
                                                                       Device* device) const {
  const std::string device_type = device ? device->device_type() : kCpu;
  KernelFactory factory;
  std::vector<std::string> available;
  std::string wanted = "any";
  {
    absl::MutexLock lock(&mu_);
    auto it = kernels_.find({def.op(), device_type});
    if (it != kernels_.end()) {
      for (const Entry& e : it->second) {
        if (e.type == DT_INVALID) {
          factory = e.factory;
          break;
        }
        absl::StatusOr<DataType> t = GetAttrType(def, e.type_attr);
        if (t.ok()) wanted = DataTypeName(*t);
        if (t.ok() && *t == e.type) {
          factory = e.factory;
          break;
        }
        available.push_back(DataTypeName(e.type));
      }
    }
  }
  if (!factory) {
    return absl::NotFoundError(absl::StrCat(
        "No ", device_type, " kernel for op '", def.op(), "' with dtype ", wanted, " (node '", def.name(), "')",
        available.empty() ? "" : absl::StrCat("; kernels exist for ", absl::StrJoin(available, ", "))));
  }
  OpKernelConstruction c(def, input_types, output_types, device);
  std::unique_ptr<OpKernel> k = factory(&c);
  absl::Status s = k->Init(&c);
  if (!s.ok()) {
    return absl::Status(s.code(), absl::StrCat("Node '", def.name(), "' (", def.op(), "): ", s.message()));
  }
  return k;
}

}  // namespace distflow
