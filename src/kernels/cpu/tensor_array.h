// TensorFlow's TensorArray as a resource of one step: a list of tensors
// that the TensorArray ops (graph/ops/tensor_array_ops.cc) write and read
// through a handle. A write stores the element itself (the tensor shares the
// value's buffer: no copy), so a loop of N writes costs O(N); stack, gather
// and concat copy each element once into their output.
//
// The ops order themselves through a float scalar "flow" that every write
// outputs and every read takes, as in TensorFlow; the values live here.
// Arrays live in the step's container (StepContainer(step_id)), which the
// executor drops when the step ends (of every run using the step id, the
// last to end: see HoldStepContainer).
//
// A forward array takes one write per index, as in TensorFlow: a second
// one is an error naming the array and the index, except a rewrite (the
// writes of a loop body that the loop's gradient rebuilds, which write the
// same values again: it keeps the last). An element never written reads as
// zeros when its shape is known (the array's element_shape, or the shape
// its written elements share: TensorFlow's inferred element shape), else it
// is an error naming the array and the index. A gradient array
// (TensorArrayGrad: the array's name + "@" + source) adds what is written
// twice at an index instead, reads an element never written as zeros of its
// forward element's shape, and a read takes the element out.
//
// Closing an array frees nothing early: the gradient of a loop may read it
// again later in the step. Thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "distflow/partial_shape.h"
#include "distflow/tensor.h"
#include "kernels/resource_mgr.h"

namespace distflow {

// The ResourceMgr container of step `step_id`'s per-step resources.
std::string StepContainer(int64_t step_id);

// Runs that use one step id on one device share its step container, and
// such runs may overlap: in-process sessions share the process's device and
// each numbers its steps from 1, function calls run with step id 0, and a
// master's random ids may collide. So each run holds the container from its
// start to its end, and the container is dropped when the last holder lets
// go: no run frees the arrays of another. (Each TensorArray op names its
// arrays uniquely, so runs sharing a container never share an array.)
// Thread-safe.
void HoldStepContainer(ResourceMgr* rm, int64_t step_id);
void ReleaseStepContainer(ResourceMgr* rm, int64_t step_id);
// How many runs hold `step_id`'s container on `rm` now (tests).
int StepContainerHoldersForTest(ResourceMgr* rm, int64_t step_id);

class TensorArray : public Resource {
 public:
  static constexpr char kTypeName[] = "TensorArray";
  const char* type_name() const override { return kTypeName; }

  struct Options {
    std::string name;  // the op's tensor_array_name, or its node's name: for errors
    DataType dtype = DT_FLOAT;
    int64_t size = 0;
    bool dynamic_size = false;
    PartialShape element_shape = PartialShape::Unknown();
    bool gradient = false;  // writes to an index add up
    // A gradient array: the shapes of its forward array's elements (unknown
    // rank where none was written), for reading unwritten elements as zeros.
    std::vector<PartialShape> forward_shapes;
  };
  explicit TensorArray(Options options);

  const std::string& name() const { return options_.name; }
  DataType dtype() const { return options_.dtype; }

  // `rewrite`: a second write to the index replaces the first (see above).
  absl::Status Write(int64_t index, const Tensor& value, bool rewrite = false) ABSL_LOCKS_EXCLUDED(mu_);
  // Reads of a gradient array take the element out (a later read gives
  // zeros): what a write's gradient read belongs to that write alone, and an
  // earlier write to the index, whose value was overwritten, gets zeros.
  absl::StatusOr<Tensor> Read(int64_t index) ABSL_LOCKS_EXCLUDED(mu_);
  // The elements at `indices` stacked into one [n, element...] tensor; they
  // must share one shape. `element_shape` is used when `indices` is empty.
  absl::StatusOr<Tensor> Gather(const std::vector<int64_t>& indices, const PartialShape& element_shape)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Every element along dimension 0, and each one's length.
  absl::Status Concat(const PartialShape& element_shape_except0, Tensor* value, std::vector<int64_t>* lengths)
      ABSL_LOCKS_EXCLUDED(mu_);
  int64_t Size() const ABSL_LOCKS_EXCLUDED(mu_);
  // What a gradient array of this one needs to know.
  Options GradientOptions(const std::string& source) const ABSL_LOCKS_EXCLUDED(mu_);

  // Bytes every TensorArray copied (element copies: stack, gather, concat,
  // the sums of gradient writes, copies of borrowed memory). For tests that
  // show a loop of writes copies each element a bounded number of times.
  static int64_t BytesCopied() { return bytes_copied_.load(std::memory_order_relaxed); }
  static void CountCopy(int64_t bytes) { bytes_copied_.fetch_add(bytes, std::memory_order_relaxed); }

 private:
  absl::Status CheckIndex(int64_t index, const char* what, bool growing) const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  absl::StatusOr<Tensor> ElementLocked(int64_t index) const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  void TakeLocked(int64_t index) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);  // gradient arrays: the element is consumed
  // The shape an element never written reads as, if one is known.
  bool ZeroShape(int64_t index, TensorShape* shape) const ABSL_SHARED_LOCKS_REQUIRED(mu_);

  const Options options_;
  mutable absl::Mutex mu_;
  std::vector<Tensor> elements_ ABSL_GUARDED_BY(mu_);  // uninitialised: never written
  static std::atomic<int64_t> bytes_copied_;
};

}  // namespace distflow
