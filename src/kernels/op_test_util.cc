#include "kernels/op_test_util.h"

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "graph/attr_value.h"
#include "graph/graph.h"
#include "kernels/device.h"
#include "kernels/kernel_registry.h"
#include "kernels/work_from_values.h"

namespace distflow {
namespace test {

OpTest::OpTest(std::string op) {
  def_.set_name("op");
  def_.set_op(std::move(op));
}

OpTest::~OpTest() = default;

OpTest& OpTest::Input(const Tensor& t) {
  inputs_.push_back(t);
  return *this;
}

OpTest& OpTest::IntraOpThreads(int n) {
  pool_ = std::make_unique<ThreadPool>("optest", n);
  return *this;
}

absl::StatusOr<std::unique_ptr<OpKernel>> OpTest::MakeKernel(Graph* g, Device* device, const Node** node_out) {
  proto::NodeDef node = def_;
  node.clear_input();
  for (size_t i = 0; i < inputs_.size(); ++i) {
    proto::NodeDef c;
    c.set_name(absl::StrCat("input_", i));
    c.set_op("Const");
    SetAttrTensor(&c, "value", inputs_[i]);
    SetAttrType(&c, "dtype", inputs_[i].dtype());
    RETURN_IF_ERROR(g->AddNode(std::move(c)).status());
    node.add_input(absl::StrCat("input_", i));
  }
  ASSIGN_OR_RETURN(const Node* n, g->AddNode(node));
  *node_out = n;
  return KernelRegistry::Global()->CreateKernel(*n, device);
}

absl::StatusOr<int64_t> OpTest::EstimatedWork() {
  Graph g;
  Device device("/job:localhost/replica:0/task:0/device:CPU:0", kCpu, pool_.get());
  const Node* node = nullptr;
  ASSIGN_OR_RETURN(std::unique_ptr<OpKernel> kernel, MakeKernel(&g, &device, &node));
  std::vector<TensorShape> shapes;
  for (const Tensor& t : inputs_) shapes.push_back(t.shape());
  const int64_t work = kernel->EstimatedWork(shapes);
  // As the executor does: a kernel the shapes do not tell about may tell from the values.
  const auto* from_values = dynamic_cast<const WorkFromValues*>(kernel.get());
  if (work >= 0 || from_values == nullptr) return work;
  std::vector<const Tensor*> values;
  for (const Tensor& t : inputs_) values.push_back(&t);
  return from_values->EstimatedWorkFromValues(values);
}

absl::StatusOr<std::vector<Tensor>> OpTest::Run() {
  Graph g;
  Device device("/job:localhost/replica:0/task:0/device:CPU:0", kCpu, pool_.get());
  const Node* node = nullptr;
  ASSIGN_OR_RETURN(std::unique_ptr<OpKernel> kernel, MakeKernel(&g, &device, &node));
  OpKernelContext::Params p;
  p.device = &device;
  p.kernel = kernel.get();
  p.inputs = inputs_;
  p.intra_op_pool = pool_.get();
  CancellationManager cm;
  p.cancellation = &cm;
  OpKernelContext ctx(std::move(p));
  RETURN_IF_ERROR(kernel->Compute(&ctx));
  std::vector<Tensor> out = *ctx.mutable_outputs();
  for (size_t i = 0; i < out.size(); ++i) {
    if (!out[i].IsInitialized()) {
      return absl::InternalError(absl::StrCat("kernel left output ", i, " unset"));
    }
    if (out[i].dtype() != node->output_type(static_cast<int>(i))) {
      return absl::InternalError(absl::StrCat("output ", i, " has dtype ", DataTypeName(out[i].dtype()), ", op says ",
                                              DataTypeName(node->output_type(static_cast<int>(i)))));
    }
    const PartialShape& inferred = node->output_shape(static_cast<int>(i));
    if (!inferred.IsCompatibleWith(out[i].shape())) {
      return absl::InternalError(absl::StrCat("shape function inferred ", inferred.DebugString(), " for output ", i,
                                              " but the kernel produced ", out[i].shape().DebugString()));
    }
  }
  return out;
}

}  // namespace test
}  // namespace distflow
