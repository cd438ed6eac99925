// OpTest: runs one op on given inputs the way the runtime would, for kernel
// unit tests. The inputs become Const nodes and the op a node of a real Graph
// (so attribute validation and shape inference run), the kernel comes from the
// global registry, and every output's shape is checked against what the shape
// function inferred, so a shape-function bug fails the test too.
//
//   OpTest t("MatMul");
//   t.Input(a).Input(b);
//   SetAttrBool(t.def(), "transpose_b", true);
//   ASSERT_OK_AND_ASSIGN(std::vector<Tensor> out, t.Run());
//
// Build-time errors (from the graph) and run-time errors (from the kernel)
// are both returned by Run. Not thread-safe.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "base/status_macros.h"
#include "base/thread_pool.h"
#include "distflow/tensor.h"
#include "proto/graph.pb.h"

namespace distflow {

class Device;
class Graph;
class Node;
class OpKernel;

namespace test {

class OpTest {
 public:
  explicit OpTest(std::string op);
  ~OpTest();

  OpTest& Input(const Tensor& t);
  // Attributes are set directly on the node: SetAttrInt(t.def(), "axis", 1).
  proto::NodeDef* def() { return &def_; }
  // Runs with an intra-op pool of `n` threads (default: none).
  OpTest& IntraOpThreads(int n);

  absl::StatusOr<std::vector<Tensor>> Run();
  // The kernel's OpKernel::EstimatedWork for the inputs' shapes or, where
  // those do not tell, its WorkFromValues estimate for their values (as the
  // executor asks).
  absl::StatusOr<int64_t> EstimatedWork();

 private:
  // Adds the node with Const inputs to `g` (*node) and makes its kernel on `device`.
  absl::StatusOr<std::unique_ptr<OpKernel>> MakeKernel(Graph* g, Device* device, const Node** node);

  proto::NodeDef def_;
  std::vector<Tensor> inputs_;
  std::unique_ptr<ThreadPool> pool_;
};

}  // namespace test
}  // namespace distflow

#define DF_ASSERT_OK(expr)            \
  do {                                \
    ::absl::Status df_s_ = (expr);    \
    ASSERT_TRUE(df_s_.ok()) << df_s_; \
  } while (0)
#define DF_EXPECT_OK(expr)            \
  do {                                \
    ::absl::Status df_s_ = (expr);    \
    EXPECT_TRUE(df_s_.ok()) << df_s_; \
  } while (0)
#define DF_ASSERT_OK_AND_ASSIGN(lhs, rexpr) DF_ASSERT_OK_AND_ASSIGN_IMPL(DF_CONCAT(df_sor_, __LINE__), lhs, rexpr)
#define DF_ASSERT_OK_AND_ASSIGN_IMPL(tmp, lhs, rexpr) \
  auto tmp = (rexpr);                                 \
  ASSERT_TRUE(tmp.ok()) << tmp.status();              \
  lhs = std::move(tmp).value()
