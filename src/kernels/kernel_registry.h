// KernelRegistry: which OpKernel implements an op on a device type for a dtype.
//
// Kernels are registered by explicit functions (kernels/cpu/all_kernels.h),
// keyed by (op, device type, dtype of the type attribute, usually "T"). A
// registration with DT_INVALID matches any dtype.
//
//   reg->Register<MatMulOp<float>>("MatMul", kCpu, DT_FLOAT);
//   reg->Register<CastOp>("Cast", kCpu, DT_INVALID);
//   reg->Register<VariableOp>("Variable", kCpu, DT_INVALID);
//
// Thread-safe.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "graph/graph.h"
#include "kernels/op_kernel.h"

namespace distflow {

inline constexpr const char kCpu[] = "CPU";

using KernelFactory = std::function<std::unique_ptr<OpKernel>(OpKernelConstruction*)>;

class KernelRegistry {
 public:
  // The process-wide registry with every standard CPU kernel.
  static KernelRegistry* Global();

  void Register(const std::string& op, const std::string& device_type, DataType type, KernelFactory factory,
                const std::string& type_attr = "T");
  template <typename K>
  void Register(const std::string& op, const std::string& device_type, DataType type,
                const std::string& type_attr = "T") {
    Register(
        op, device_type, type,
        [](OpKernelConstruction* c) -> std::unique_ptr<OpKernel> { return std::make_unique<K>(c); }, type_attr);
  }

  // Builds and initialises the kernel for `node` on `device`. NotFound naming
  // the op, device type and dtype (and the dtypes that do have kernels) if none.
  absl::StatusOr<std::unique_ptr<OpKernel>> CreateKernel(const Node& node, Device* device) const;
  // The same from parts, for tests and the kernel harness.
  absl::StatusOr<std::unique_ptr<OpKernel>> CreateKernel(const proto::NodeDef& def,
                                                         const std::vector<DataType>& input_types,
                                                         const std::vector<DataType>& output_types,
                                                         Device* device) const;

  bool HasKernel(const std::string& op, const std::string& device_type) const;

 private:
  struct Entry {
    DataType type;
    std::string type_attr;
    KernelFactory factory;
  };
  mutable absl::Mutex mu_;
  std::map<std::pair<std::string, std::string>, std::vector<Entry>> kernels_ ABSL_GUARDED_BY(mu_);
};

}  // namespace distflow
