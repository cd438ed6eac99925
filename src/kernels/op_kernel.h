// The kernel interface: an OpKernel computes one node on one device.
//
// A kernel is built once per node (its constructor and Init read attributes)
// and Compute is called once per step, possibly from several threads at once
// for concurrent steps: Compute must not mutate the kernel. Errors are
// returned as a Status; the executor prefixes the node's name and op.
//
// Inputs arrive as Tensors. A "Ref(T)" input (an Assign's variable) arrives as
// the Var itself through input_ref(). Outputs are allocated through the
// context, or forwarded (set_output) when an input can be passed through.
//
// AsyncOpKernel is for kernels that wait (a Recv): ComputeAsync returns at
// once and calls `done` when finished, on any thread.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "base/cancellation.h"
#include "base/thread_pool.h"
#include "distflow/tensor.h"
#include "proto/graph.pb.h"

namespace distflow {

class Device;
class Var;
class ResourceMgr;
class Rendezvous;
struct NodeExecStats;

class OpKernelConstruction {
 public:
  OpKernelConstruction(const proto::NodeDef& def, std::vector<DataType> input_types, std::vector<DataType> output_types,
                       Device* device)
      : def_(def), input_types_(std::move(input_types)), output_types_(std::move(output_types)), device_(device) {}

  const proto::NodeDef& def() const { return def_; }
  int num_inputs() const { return static_cast<int>(input_types_.size()); }
  int num_outputs() const { return static_cast<int>(output_types_.size()); }
  DataType input_type(int i) const { return input_types_[static_cast<size_t>(i)]; }
  DataType output_type(int i) const { return output_types_[static_cast<size_t>(i)]; }
  Device* device() const { return device_; }

 private:
  const proto::NodeDef& def_;
  std::vector<DataType> input_types_;
  std::vector<DataType> output_types_;
  Device* device_;
};

class OpKernelContext;

class OpKernel {
 public:
  explicit OpKernel(OpKernelConstruction* c);
  virtual ~OpKernel() = default;
  OpKernel(const OpKernel&) = delete;
  OpKernel& operator=(const OpKernel&) = delete;

  // Reads attributes; called once after construction. Attributes were
  // validated against the op when the graph was built.
  virtual absl::Status Init(OpKernelConstruction* c) { return absl::OkStatus(); }
  virtual absl::Status Compute(OpKernelContext* ctx) = 0;
  virtual bool IsAsync() const { return false; }
  // Cheap kernels run inline on the thread that made them ready.
  virtual bool IsExpensive() const { return true; }
  // Roughly how many element operations Compute does for inputs of these
  // shapes (a variable input counts as its declared shape), or -1 if the
  // shapes do not tell: the work is set by an input's value (a shape, a
  // count, multiples: Fill, Tile, Range, random ops). The executor runs an
  // expensive kernel inline on the thread that made it ready, an RPC thread
  // included, when this is small, since a hand-off to the pool costs more.
  // Default: the number of input elements (one pass over the inputs).
  virtual int64_t EstimatedWork(const std::vector<TensorShape>& inputs) const;
  // True if, when input `i` (not a ref input) is a variable's value, the
  // kernel is given the variable itself (`input_ref(i)`, `input(i)` left
  // empty) and reads it under the variable's reader lock, instead of a
  // snapshot. A lookup that copies a few rows of a large table (Gather) says
  // so: a snapshot held meanwhile would make a sparse update of the table
  // running at that moment copy all of it before writing its rows.
  virtual bool ReadsVariableInputUnderLock(int i) const { return false; }

  const std::string& name() const { return name_; }
  const std::string& type_string() const { return op_; }
  DataType output_type(int i) const { return output_types_[static_cast<size_t>(i)]; }
  int num_outputs() const { return static_cast<int>(output_types_.size()); }

 private:
  const std::string name_;
  const std::string op_;
  const std::vector<DataType> output_types_;
};

class AsyncOpKernel : public OpKernel {
 public:
  using OpKernel::OpKernel;
  using DoneCallback = std::function<void(absl::Status)>;
  virtual void ComputeAsync(OpKernelContext* ctx, DoneCallback done) = 0;
  absl::Status Compute(OpKernelContext* ctx) final;  // runs ComputeAsync and waits
  bool IsAsync() const override { return true; }
};

// What one kernel invocation sees. Built by the executor (or a test harness).
class OpKernelContext {
 public:
  struct Params {
    Device* device = nullptr;
    const OpKernel* kernel = nullptr;
    int64_t step_id = 0;
    std::vector<Tensor> inputs;                    // values (for ref inputs: a snapshot, may be empty)
    std::vector<std::shared_ptr<Var>> input_refs;  // non-null for ref inputs
    CancellationManager* cancellation = nullptr;
    Rendezvous* rendezvous = nullptr;
    // Container for variables whose container attribute is empty.
    std::string default_container;
    ThreadPool* intra_op_pool = nullptr;
    // The bytes the step's kernel outputs hold now (each output counts until
    // its last tensor is gone), and the most they may (0: no limit); shared
    // by every kernel of the step.
    std::shared_ptr<std::atomic<int64_t>> step_bytes;
    int64_t max_step_bytes = 0;
    // A traced step's trace (distflow/step_stats.h), for records a kernel
    // adds of its own (a collective's phases, collective/run_observer.h);
    // empty when the step is not traced. Callable from any thread until the
    // kernel is done.
    std::function<void(const NodeExecStats&)> trace;
  };

  explicit OpKernelContext(Params params);

  int num_inputs() const { return static_cast<int>(params_.inputs.size()); }
  const Tensor& input(int i) const { return params_.inputs[static_cast<size_t>(i)]; }
  // The variable behind a Ref(T) input, or nullptr.
  Var* input_ref(int i) const { return params_.input_refs[static_cast<size_t>(i)].get(); }
  const std::shared_ptr<Var>& input_ref_ptr(int i) const { return params_.input_refs[static_cast<size_t>(i)]; }

  int num_outputs() const { return static_cast<int>(outputs_.size()); }
  // Allocates output i; ResourceExhausted if memory runs out or the step's
  // outputs would hold more than Params::max_step_bytes.
  absl::StatusOr<Tensor*> allocate_output(int i, const TensorShape& shape);
  // Sets output i to an existing tensor (e.g. forwarding an input). Its dtype
  // must be the output's dtype.
  absl::Status set_output(int i, Tensor t);
  // Sets a Ref(T) output: the variable itself (Variable op).
  void set_output_ref(int i, std::shared_ptr<Var> var);

  const Tensor& output(int i) const { return outputs_[static_cast<size_t>(i)]; }
  std::vector<Tensor>* mutable_outputs() { return &outputs_; }
  const std::shared_ptr<Var>& output_ref(int i) const { return output_refs_[static_cast<size_t>(i)]; }

  Device* device() const { return params_.device; }
  ResourceMgr* resource_manager() const;
  const std::string& default_container() const { return params_.default_container; }
  ThreadPool* intra_op_pool() const { return params_.intra_op_pool; }
  int64_t step_id() const { return params_.step_id; }
  CancellationManager* cancellation_manager() const { return params_.cancellation; }
  Rendezvous* rendezvous() const { return params_.rendezvous; }
  const std::function<void(const NodeExecStats&)>& trace() const { return params_.trace; }

  // Runs fn(begin, end) over [0, n) on the intra-op pool when there is one and
  // the work is big enough (cost_per_unit: rough cycles per element).
  void ParallelFor(int64_t n, int64_t cost_per_unit, const std::function<void(int64_t, int64_t)>& fn) const;

 private:
  Params params_;
  std::vector<Tensor> outputs_;
  std::vector<std::shared_ptr<Var>> output_refs_;
};

}  // namespace distflow
