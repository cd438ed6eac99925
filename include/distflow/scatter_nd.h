// tf.scatter_nd_update, tf.scatter_nd_add and tf.tensor_scatter_nd_update:
// slices addressed by index tuples (the last dimension of `indices`, of
// length k) written into a tensor of shape S. `updates` has the shape
// indices.shape[:-1] + S[k:].
//
// ScatterNdUpdate and ScatterNdAdd change a variable (`ref`, from
// ops::Variable or MakeVariable) in place under its lock and return the
// reference; of duplicate tuples the last update wins (Update) or all are
// added (Add). They have no gradient. TensorScatterUpdate returns a copy of
// `tensor` with the slices assigned; its gradient is zero at the written
// slices for `tensor`, and for `updates` the output's gradient at each tuple,
// given only to the update written last where tuples repeat.
//
// A tuple out of range is a run-time error naming the op, the node, the
// tuple's position, the tuple, the entry and its bound; nothing is written.
// Wrong shapes are errors in the scope when they are known.
#pragma once

#include "distflow/export.h"
#include "distflow/scope.h"

namespace distflow {
namespace ops {

DISTFLOW_EXPORT Output ScatterNdUpdate(const Scope& s, const Output& ref, const Output& indices, const Output& updates);
DISTFLOW_EXPORT Output ScatterNdAdd(const Scope& s, const Output& ref, const Output& indices, const Output& updates);
DISTFLOW_EXPORT Output TensorScatterUpdate(const Scope& s, const Output& tensor, const Output& indices,
                                           const Output& updates);

}  // namespace ops
}  // namespace distflow
