// distflow's public C++ API: build a graph with a Scope and the op wrappers,
// run it with a Session.
//
//   #include "distflow/distflow.h"
//   namespace df = distflow;
//   df::Scope root = df::Scope::NewRootScope();
//   auto hello = df::ops::Const(root, "Hello, distributed TensorFlow!");
//   df::Session sess;
//   auto out = sess.Run({hello});   // StatusOr<std::vector<Tensor>>
#pragma once

#include "client/ops.h"
#include "client/scope.h"
#include "client/session.h"
#include "distflow/version.h"
#include "graph/attr_value.h"
#include "distributed/server.h"
#include "runtime/local_session.h"
#include "tensor/tensor.h"
