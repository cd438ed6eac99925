#include "runtime/function_runtime.h"

#include <memory>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "kernels/function.h"
#include "runtime/executor.h"

namespace distflow {
namespace {

class ExecutorFunction : public FunctionInstance {
 public:
  static absl::StatusOr<std::shared_ptr<const FunctionInstance>> Make(const proto::FunctionDef& def, Device* device,
                                                                      const std::string& container) {
    auto f = std::shared_ptr<ExecutorFunction>(new ExecutorFunction(def));
    absl::StatusOr<std::unique_ptr<Graph>> graph = Graph::FromGraphDef(def.body());
    if (!graph.ok()) return f->Named(graph.status());
    f->graph_ = std::move(*graph);
    std::vector<TensorId> feeds, fetches;
    for (int i = 0; i < def.arg_size(); ++i) {
      const Node* n = f->graph_->FindNode(def.arg(i));
      if (n == nullptr || n->num_outputs() != 1 || n->output_type(0) != static_cast<DataType>(def.arg_type(i))) {
        return f->Named(absl::InvalidArgumentError(
            absl::StrCat("argument ", i, " '", def.arg(i), "' is not a node with one output of the declared type")));
      }
      feeds.push_back({def.arg(i), 0});
    }
    for (int i = 0; i < def.ret_size(); ++i) {
      absl::StatusOr<TensorId> id = ParseTensorId(def.ret(i));
      if (!id.ok()) return f->Named(id.status());
      fetches.push_back(*id);
    }
    ExecutorOptions options;
    options.device = device;
    options.intra_op_pool = device->intra_op_pool();
    options.default_container = container;
    absl::StatusOr<std::unique_ptr<Executor>> exec =
        Executor::Create(*f->graph_, options, &f->kernels_, feeds, fetches, {});
    if (!exec.ok()) return f->Named(exec.status());
    f->executor_ = std::move(*exec);
    return std::shared_ptr<const FunctionInstance>(f);
  }

  absl::StatusOr<std::vector<Tensor>> Run(const std::vector<Tensor>& args,
                                          CancellationManager* cancellation) const override {
    if (static_cast<int>(args.size()) != def_.arg_size()) {
      return Named(
          absl::InvalidArgumentError(absl::StrCat("takes ", def_.arg_size(), " arguments, got ", args.size())));
    }
    for (size_t i = 0; i < args.size(); ++i) {
      if (args[i].dtype() != static_cast<DataType>(def_.arg_type(static_cast<int>(i)))) {
        return Named(absl::InvalidArgumentError(absl::StrCat(
            "argument ", i, " must be ", DataTypeName(static_cast<DataType>(def_.arg_type(static_cast<int>(i)))),
            ", got ", DataTypeName(args[i].dtype()))));
      }
    }
    StepOptions step;
    step.cancellation = cancellation;
    absl::StatusOr<std::vector<Tensor>> out = executor_->Run(step, args);
    if (!out.ok()) return Named(out.status());
    return out;
  }
  const proto::FunctionDef& def() const override { return def_; }

 private:
  explicit ExecutorFunction(proto::FunctionDef def) : def_(std::move(def)) {}
  absl::Status Named(const absl::Status& s) const {
    return absl::Status(s.code(), absl::StrCat("In function '", def_.name(), "': ", s.message()));
  }

  const proto::FunctionDef def_;
  std::unique_ptr<Graph> graph_;
  mutable KernelCache kernels_;
  std::unique_ptr<Executor> executor_;
};

}  // namespace

void RegisterFunctionRuntime() {
  static std::once_flag once;
  std::call_once(once, [] { SetFunctionInstantiator(ExecutorFunction::Make); });
}

}  // namespace distflow
