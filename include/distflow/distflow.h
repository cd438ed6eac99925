// distflow's public C++ API, all of it: build a graph with a Scope and the op
// wrappers, run it with a Session, in process or on a cluster of Servers, and
// train with the optimizers, layers, Saver and Supervisor of distflow/train/.
//
//   #include "distflow/distflow.h"
//   namespace df = distflow;
//   df::Scope root = df::Scope::NewRootScope();
//   auto hello = df::ops::Const(root, "Hello, distributed TensorFlow!");
//   df::Session sess;
//   auto out = sess.Run({hello});   // StatusOr<std::vector<Tensor>>
//
// Every header here is self-contained and may be included on its own. None
// includes protobuf, gRPC, Eigen or oneDNN headers; what they declare is
// built on abseil's Status and containers and the standard library.
#pragma once

#include "distflow/auth.h"
#include "distflow/cluster_spec.h"
#include "distflow/control_flow.h"
#include "distflow/data/mnist.h"
#include "distflow/data/tfrecord.h"
#include "distflow/function.h"
#include "distflow/gradients.h"
#include "distflow/logging.h"
#include "distflow/ops.h"
#include "distflow/partial_shape.h"
#include "distflow/scatter_nd.h"
#include "distflow/scope.h"
#include "distflow/server.h"
#include "distflow/session.h"
#include "distflow/session_options.h"
#include "distflow/status.h"
#include "distflow/step_stats.h"
#include "distflow/task_config.h"
#include "distflow/tensor.h"
#include "distflow/tensor_array.h"
#include "distflow/train/collective_all_reduce_optimizer.h"
#include "distflow/train/event_writer.h"
#include "distflow/train/layers.h"
#include "distflow/train/optimizer.h"
#include "distflow/train/progress_hook.h"
#include "distflow/train/replica_device_setter.h"
#include "distflow/train/saver.h"
#include "distflow/train/summary_hooks.h"
#include "distflow/train/supervisor.h"
#include "distflow/train/sync_replicas_optimizer.h"
#include "distflow/types.h"
#include "distflow/version.h"
