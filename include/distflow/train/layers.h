// Layers in the style of TF-slim: each creates its variables through the
// scope (so a device function from Scope::WithDeviceFunction places them,
// e.g. on parameter servers) and returns the layer's output.
//
//   Scope s = root.WithDeviceFunction(ReplicaDeviceSetter(...));
//   auto h = layers::conv2d(s, images, 32, {5, 5});           // "Conv/weights", "Conv/biases"
//   h = layers::max_pool2d(s, h, {2, 2});
//   h = layers::flatten(s, h);
//   auto logits = layers::fully_connected(s, h, 10, layers::kNoActivation, "logits");
//
// Variables are "<name>/weights" and "<name>/biases" (a repeated name gets
// "_1", ... as sub-scopes do), trainable, initialised by
// GlobalVariablesInitializer: weights by glorot_uniform (TF-slim's xavier
// initializer) unless told otherwise, biases by zeros. Inputs are NHWC.
// Errors (unknown channel count, bad kernel size) are recorded in the scope.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "distflow/export.h"
#include "distflow/ops.h"
#include "distflow/scope.h"

namespace distflow {
namespace layers {

// An activation function; an empty one means none (linear).
using Activation = std::function<Output(const Scope&, const Output&)>;
DISTFLOW_EXPORT Output relu(const Scope& s, const Output& x);  // the Relu op
// Defined in the library, so that including this header does not by itself
// need the train library at link time.
extern DISTFLOW_EXPORT const Activation kRelu;
inline const Activation kNoActivation = nullptr;

// Builds an initial value of `shape` and `dtype` on `s`. `fan_in`/`fan_out`
// are the layer's (for convolutions: receptive field times channels).
struct DISTFLOW_EXPORT InitContext {
  std::vector<int64_t> shape;
  DataType dtype = DT_FLOAT;
  int64_t fan_in = 0, fan_out = 0;
};
using Initializer = std::function<Output(const Scope& s, const InitContext& c)>;
// U(-limit, limit), limit = sqrt(6 / (fan_in + fan_out)).
DISTFLOW_EXPORT Initializer glorot_uniform(int64_t seed = 0);
// N(mean, stddev) truncated at two standard deviations.
DISTFLOW_EXPORT Initializer truncated_normal(double stddev, double mean = 0.0, int64_t seed = 0);
DISTFLOW_EXPORT Initializer zeros();
DISTFLOW_EXPORT Initializer constant(double value);

struct DISTFLOW_EXPORT LayerInitializers {
  Initializer weights = glorot_uniform();
  Initializer biases = zeros();
};

// 2-D convolution (Conv2D, NHWC) with a [kh, kw, in, num_outputs] kernel,
// plus biases (BiasAdd) and the activation.
DISTFLOW_EXPORT Output conv2d(const Scope& scope, const Output& x, int64_t num_outputs, std::array<int64_t, 2> kernel,
                              int64_t stride = 1, const std::string& padding = "SAME",
                              const Activation& activation = kRelu, const std::string& name = "Conv",
                              const LayerInitializers& init = {});

// Max pooling (MaxPool, NHWC); `name` empty = a default unique name.
DISTFLOW_EXPORT Output max_pool2d(const Scope& scope, const Output& x, std::array<int64_t, 2> kernel = {2, 2},
                                  int64_t stride = 2, const std::string& padding = "VALID",
                                  const std::string& name = "");

// [batch, d1, d2, ...] -> [batch, d1*d2*...]; the non-batch dims must be known.
DISTFLOW_EXPORT Output flatten(const Scope& scope, const Output& x, const std::string& name = "");

// x [batch, in] times weights [in, num_outputs], plus biases, then the activation.
DISTFLOW_EXPORT Output fully_connected(const Scope& scope, const Output& x, int64_t num_outputs,
                                       const Activation& activation = kRelu,
                                       const std::string& name = "fully_connected", const LayerInitializers& init = {});
// The same, named "dense" by default (tf.layers).
DISTFLOW_EXPORT Output dense(const Scope& scope, const Output& x, int64_t num_outputs,
                             const Activation& activation = kRelu, const std::string& name = "dense",
                             const LayerInitializers& init = {});

}  // namespace layers
}  // namespace distflow
