// Call: runs the graph function in its `f` attribute (kernels/function.h)
// on the node's inputs. The function is instantiated on the node's device
// the first time the node runs and shared afterwards.
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "graph/attr_value.h"
#include "kernels/cpu/all_kernels.h"
#include "kernels/device.h"
#include "kernels/function.h"
#include "kernels/kernel_registry.h"

namespace distflow {
namespace {

class CallOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Init(OpKernelConstruction* c) override {
    DF_ASSIGN_OR_RETURN(f_, GetAttrString(c->def(), "f"));
    return absl::OkStatus();
  }
  absl::Status Compute(OpKernelContext* ctx) override {
    DF_ASSIGN_OR_RETURN(std::shared_ptr<const FunctionInstance> fn,
                        InstantiateFunction(f_, ctx->device(), ctx->default_container()));
    std::vector<Tensor> args;
    for (int i = 0; i < ctx->num_inputs(); ++i) args.push_back(ctx->input(i));
    DF_ASSIGN_OR_RETURN(std::vector<Tensor> out, fn->Run(args, ctx->cancellation_manager()));
    if (static_cast<int>(out.size()) != num_outputs()) {
      return absl::InternalError(
          absl::StrCat("function '", fn->def().name(), "' gave ", out.size(), " results, not ", num_outputs()));
    }
    for (int i = 0; i < num_outputs(); ++i) RETURN_IF_ERROR(ctx->set_output(i, std::move(out[static_cast<size_t>(i)])));
    return absl::OkStatus();
  }

 private:
  std::string f_;
};

}  // namespace

void RegisterFunctionKernels(KernelRegistry* r) { r->Register<CallOp>("Call", kCpu, DT_INVALID); }

}  // namespace distflow
