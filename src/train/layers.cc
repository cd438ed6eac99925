#include "distflow/train/layers.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "client/graph_state.h"
#include "distflow/train/optimizer.h"
#include "graph/attr_value.h"
#include "graph/op_def.h"

namespace distflow {
namespace layers {

const Activation kRelu = relu;

namespace {

Output ScalarOf(const Scope& s, double v, DataType dtype) {
  return dtype == DT_DOUBLE ? ops::Const(s, v) : ops::Const(s, static_cast<float>(v));
}

Output Out0(const Scope& s, const Operation& op) { return Output(op, 0, s.WithOpName("")); }

bool HasOp(const char* op) { return OpRegistry::Global()->LookUp(op) != nullptr; }

// x + b over the last dimension: BiasAdd when registered, else a broadcasting Add.
Output AddBias(const Scope& s, const Output& x, const Output& b) {
  if (HasOp("BiasAdd")) return Out0(s, ops::Raw(s.WithOpName("BiasAdd"), "BiasAdd", {x, b}));
  return ops::Add(s.WithOpName("add"), x, b);
}

Output Activate(const Scope& s, const Output& x, const Activation& activation) {
  return activation ? activation(s, x) : x;
}

// The known last dimension of x, or -1 (with an error recorded).
int64_t KnownLastDim(const Scope& s, const Output& x, int rank, const char* layer) {
  const PartialShape shape = x.shape();
  if (shape.unknown_rank() || shape.rank() != rank || shape.dim(rank - 1) < 0) {
    s.UpdateStatus(
        absl::InvalidArgumentError(absl::StrCat(layer, ": input '", x.name(), "' must have rank ", rank,
                                                " and a known last dimension, got shape ", shape.DebugString())));
    return -1;
  }
  return shape.dim(rank - 1);
}

bool CheckInput(const Scope& s, const Output& x, const char* layer) {
  if (!x.ok()) {
    s.UpdateStatus(absl::InvalidArgumentError(absl::StrCat(layer, ": the input is invalid (an earlier op failed)")));
    return false;
  }
  if (x.dtype() != DT_FLOAT && x.dtype() != DT_DOUBLE) {
    s.UpdateStatus(absl::InvalidArgumentError(
        absl::StrCat(layer, ": input '", x.name(), "' has dtype ", DataTypeName(x.dtype()), "; need float or double")));
    return false;
  }
  return true;
}

// "<scope>/weights" and "<scope>/biases".
std::pair<Output, Output> WeightsAndBiases(const Scope& sub, const std::vector<int64_t>& wshape, int64_t fan_in,
                                           int64_t fan_out, DataType dtype, const LayerInitializers& init) {
  InitContext wc{wshape, dtype, fan_in, fan_out};
  InitContext bc{{wshape.back()}, dtype, fan_in, fan_out};
  Initializer winit = init.weights ? init.weights : glorot_uniform();
  Initializer binit = init.biases ? init.biases : zeros();
  Output w = train_internal::NewVariable(
      sub, "weights", PartialShape(absl::Span<const int64_t>(wshape)), dtype,
      [&](const Scope& s) { return winit(s, wc); }, /*trainable=*/true);
  Output b = train_internal::NewVariable(
      sub, "biases", PartialShape({wshape.back()}), dtype, [&](const Scope& s) { return binit(s, bc); },
      /*trainable=*/true);
  return {w, b};
}

}  // namespace

Output relu(const Scope& s, const Output& x) {
  if (HasOp("Relu")) return Out0(s, ops::Raw(s.WithOpName("Relu"), "Relu", {x}));
  return ops::Maximum(s.WithOpName("Relu"), x, ScalarOf(s.WithOpName(""), 0.0, x.dtype()));
}

Initializer glorot_uniform(int64_t seed) {
  return [seed](const Scope& s, const InitContext& c) {
    const double limit = std::sqrt(6.0 / static_cast<double>(std::max<int64_t>(c.fan_in + c.fan_out, 1)));
    Output u = ops::RandomUniform(s, c.shape, c.dtype, seed);  // [0, 1)
    return ops::Sub(s, ops::Mul(s, u, ScalarOf(s, 2 * limit, c.dtype)), ScalarOf(s, limit, c.dtype));
  };
}

Initializer truncated_normal(double stddev, double mean, int64_t seed) {
  return [=](const Scope& s, const InitContext& c) {
    Output n = ops::TruncatedNormal(s, c.shape, c.dtype, seed);
    Output scaled = ops::Mul(s, n, ScalarOf(s, stddev, c.dtype));
    return mean == 0.0 ? scaled : ops::Add(s, scaled, ScalarOf(s, mean, c.dtype));
  };
}

Initializer zeros() { return constant(0.0); }

Initializer constant(double value) {
  return [value](const Scope& s, const InitContext& c) { return ops::Fill(s, c.shape, ScalarOf(s, value, c.dtype)); };
}

Output conv2d(const Scope& scope, const Output& x, int64_t num_outputs, std::array<int64_t, 2> kernel, int64_t stride,
              const std::string& padding, const Activation& activation, const std::string& name,
              const LayerInitializers& init) {
  if (!scope.ok() || !CheckInput(scope, x, "conv2d")) return Output();
  if (num_outputs <= 0 || kernel[0] <= 0 || kernel[1] <= 0 || stride <= 0) {
    scope.UpdateStatus(absl::InvalidArgumentError(absl::StrCat("conv2d '", name, "': num_outputs (", num_outputs,
                                                               "), kernel (", kernel[0], "x", kernel[1],
                                                               ") and stride (", stride, ") must be positive")));
    return Output();
  }
  const int64_t in = KnownLastDim(scope, x, 4, "conv2d");
  if (in < 0) return Output();
  Scope sub = scope.NewSubScope(name);
  const int64_t field = kernel[0] * kernel[1];
  auto [w, b] =
      WeightsAndBiases(sub, {kernel[0], kernel[1], in, num_outputs}, field * in, field * num_outputs, x.dtype(), init);
  if (!w.ok() || !b.ok()) return Output();
  Operation conv = ops::Raw(sub.WithOpName("Conv2D"), "Conv2D", {x, w}, [&](proto::NodeDef* n) {
    SetAttrIntList(n, "strides", {1, stride, stride, 1});
    SetAttrString(n, "padding", padding);
  });
  if (!conv.ok()) return Output();
  return Activate(sub, AddBias(sub, Out0(sub, conv), b), activation);
}

Output max_pool2d(const Scope& scope, const Output& x, std::array<int64_t, 2> kernel, int64_t stride,
                  const std::string& padding, const std::string& name) {
  if (!scope.ok() || !CheckInput(scope, x, "max_pool2d")) return Output();
  Scope s = name.empty() ? scope : scope.WithOpName(name);
  Operation pool = ops::Raw(s, "MaxPool", {x}, [&](proto::NodeDef* n) {
    SetAttrIntList(n, "ksize", {1, kernel[0], kernel[1], 1});
    SetAttrIntList(n, "strides", {1, stride, stride, 1});
    SetAttrString(n, "padding", padding);
  });
  if (!pool.ok()) return Output();
  return Out0(scope, pool);
}

Output flatten(const Scope& scope, const Output& x, const std::string& name) {
  if (!scope.ok() || !x.ok()) return Output();
  const PartialShape shape = x.shape();
  if (shape.unknown_rank() || shape.rank() < 1) {
    scope.UpdateStatus(absl::InvalidArgumentError(
        absl::StrCat("flatten: input '", x.name(), "' must have a known rank >= 1, got ", shape.DebugString())));
    return Output();
  }
  int64_t k = 1;
  for (int i = 1; i < shape.rank(); ++i) {
    if (shape.dim(i) < 0) {
      scope.UpdateStatus(absl::InvalidArgumentError(absl::StrCat(
          "flatten: input '", x.name(), "' must have known non-batch dimensions, got ", shape.DebugString())));
      return Output();
    }
    k *= shape.dim(i);
  }
  return ops::Reshape(name.empty() ? scope : scope.WithOpName(name), x, std::vector<int64_t>{-1, k});
}

Output fully_connected(const Scope& scope, const Output& x, int64_t num_outputs, const Activation& activation,
                       const std::string& name, const LayerInitializers& init) {
  if (!scope.ok() || !CheckInput(scope, x, "fully_connected")) return Output();
  if (num_outputs <= 0) {
    scope.UpdateStatus(absl::InvalidArgumentError(
        absl::StrCat("fully_connected '", name, "': num_outputs must be positive, got ", num_outputs)));
    return Output();
  }
  const int64_t in = KnownLastDim(scope, x, 2, "fully_connected");
  if (in < 0) return Output();
  Scope sub = scope.NewSubScope(name);
  auto [w, b] = WeightsAndBiases(sub, {in, num_outputs}, in, num_outputs, x.dtype(), init);
  if (!w.ok() || !b.ok()) return Output();
  Output y = ops::MatMul(sub.WithOpName("MatMul"), x, w);
  return Activate(sub, AddBias(sub, y, b), activation);
}

Output dense(const Scope& scope, const Output& x, int64_t num_outputs, const Activation& activation,
             const std::string& name, const LayerInitializers& init) {
  return fully_connected(scope, x, num_outputs, activation, name, init);
}

}  // namespace layers
}  // namespace distflow
