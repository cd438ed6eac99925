// Graph functions as kernels see them. A FunctionInstance runs one
// instantiation of a FunctionDef (proto/function.proto) on a device: the
// runtime (runtime/function_runtime.cc) builds its body into a Graph and an
// Executor once, and every Run executes that executor with the arguments fed.
// The kernels layer cannot link the runtime, which sits above it, so the
// runtime installs the instantiator here (SetFunctionInstantiator, called
// when a session is created); ops that call functions (Call, MapDataset)
// ask for instances through InstantiateFunction, which caches one per
// (function, device, container): a function is instantiated once per
// signature and shared by every node and dataset that calls it.
//
// Thread-safe: an instance may be run from many threads at once.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "base/cancellation.h"
#include "distflow/tensor.h"
#include "proto/function.pb.h"

namespace distflow {

class Device;

class FunctionInstance {
 public:
  virtual ~FunctionInstance() = default;
  // Runs the function on `args` (its argument dtypes, in order) and returns
  // its results. Errors name the function and the failing body node.
  virtual absl::StatusOr<std::vector<Tensor>> Run(const std::vector<Tensor>& args,
                                                  CancellationManager* cancellation) const = 0;
  virtual const proto::FunctionDef& def() const = 0;
};

using FunctionInstantiator = std::function<absl::StatusOr<std::shared_ptr<const FunctionInstance>>(
    const proto::FunctionDef& def, Device* device, const std::string& container)>;

// Installs the runtime's instantiator (the first call wins; later ones are ignored).
void SetFunctionInstantiator(FunctionInstantiator instantiator);

// The instance of the function serialized in `serialized` for this device
// and container, made on first use. InvalidArgument if `serialized` is not
// a FunctionDef; FailedPrecondition if no runtime installed an instantiator.
absl::StatusOr<std::shared_ptr<const FunctionInstance>> InstantiateFunction(const std::string& serialized,
                                                                            Device* device,
                                                                            const std::string& container);

// Parses a serialized FunctionDef and checks it is well formed (as many
// types as args and rets); InvalidArgument naming what is wrong.
absl::StatusOr<proto::FunctionDef> ParseFunctionDef(const std::string& serialized);

}  // namespace distflow
