// Gradients of the math, matmul and reduction ops (TensorFlow's math_grad.py).
#include "absl/strings/str_cat.h"
#include "client/grad/grad_families.h"
#include "client/graph_state.h"
#include "graph/attr_value.h"

namespace distflow {
namespace {

using grad::Input;
using grad::Out;
using grad::ReduceForBroadcast;
using grad::ScalarConst;
using grad::SumAxes;

using Grads = std::vector<Output>;

absl::Status Done(const Scope& s) { return s.status(); }

#define GRAD_FN(NAME) absl::Status NAME(const Scope& s, const Operation& op, const Grads& g, Grads* out)

GRAD_FN(IdentityGrad) {
  out->push_back(g[0]);
  for (int i = 1; i < op.node()->num_inputs(); ++i) out->push_back(Output());
  return Done(s);
}

GRAD_FN(AddGrad) {
  auto [gx, gy] = ReduceForBroadcast(s, Input(s, op, 0), Input(s, op, 1), g[0], g[0]);
  *out = {gx, gy};
  return Done(s);
}

GRAD_FN(SubGrad) {
  auto [gx, gy] = ReduceForBroadcast(s, Input(s, op, 0), Input(s, op, 1), g[0], ops::Neg(s, g[0]));
  *out = {gx, gy};
  return Done(s);
}

GRAD_FN(MulGrad) {
  Output x = Input(s, op, 0), y = Input(s, op, 1);
  auto [gx, gy] = ReduceForBroadcast(s, x, y, ops::Mul(s, g[0], y), ops::Mul(s, x, g[0]));
  *out = {gx, gy};
  return Done(s);
}

GRAD_FN(DivGrad) {
  Output x = Input(s, op, 0), y = Input(s, op, 1);
  Output gx = ops::Div(s, g[0], y);
  Output gy = ops::Mul(s, g[0], ops::Div(s, ops::Div(s, ops::Neg(s, x), y), y));
  auto [rx, ry] = ReduceForBroadcast(s, x, y, gx, gy);
  *out = {rx, ry};
  return Done(s);
}

GRAD_FN(PowGrad) {
  Output x = Input(s, op, 0), y = Input(s, op, 1), z = Out(s, op, 0);
  DataType dt = x.dtype();
  // dz/dx = y * x^(y-1); dz/dy = z * log(x) (0 where x <= 0).
  Output gx = ops::Mul(s, ops::Mul(s, g[0], y), ops::Pow(s, x, ops::Sub(s, y, ScalarConst(s, 1, dt))));
  Output positive = ops::Greater(s, x, ScalarConst(s, 0, dt));
  Output log_x = ops::Select(s, positive, ops::Log(s, x), ops::ZerosLike(s, x));
  Output gy = ops::Mul(s, ops::Mul(s, g[0], z), log_x);
  auto [rx, ry] = ReduceForBroadcast(s, x, y, gx, gy);
  *out = {rx, ry};
  return Done(s);
}

// Maximum (ge = true) and Minimum: the gradient goes to x where x wins
// (ties to x), to y elsewhere.
absl::Status MaxMinGrad(const Scope& s, const Operation& op, const Grads& g, Grads* out, bool ge) {
  Output x = Input(s, op, 0), y = Input(s, op, 1);
  Output cmp = ge ? Out(s, ops::Raw(s, "GreaterEqual", {x, y})) : Out(s, ops::Raw(s, "LessEqual", {x, y}));
  Output mask = ops::Cast(s, cmp, x.dtype());
  Output gx = ops::Mul(s, g[0], mask);
  Output gy = ops::Sub(s, g[0], gx);
  auto [rx, ry] = ReduceForBroadcast(s, x, y, gx, gy);
  *out = {rx, ry};
  return Done(s);
}
GRAD_FN(MaximumGrad) { return MaxMinGrad(s, op, g, out, true); }
GRAD_FN(MinimumGrad) { return MaxMinGrad(s, op, g, out, false); }

GRAD_FN(NegGrad) {
  *out = {ops::Neg(s, g[0])};
  return Done(s);
}
GRAD_FN(SquareGrad) {
  Output x = Input(s, op, 0);
  *out = {ops::Mul(s, g[0], ops::Mul(s, ScalarConst(s, 2, x.dtype()), x))};
  return Done(s);
}
GRAD_FN(SqrtGrad) {
  Output y = Out(s, op, 0);
  *out = {ops::Div(s, ops::Mul(s, g[0], ScalarConst(s, 0.5, y.dtype())), y)};
  return Done(s);
}
GRAD_FN(RsqrtGrad) {
  // d(x^-1/2)/dx = -1/2 x^-3/2 = -1/2 y^3.
  Output y = Out(s, op, 0);
  Output y3 = ops::Mul(s, ops::Square(s, y), y);
  *out = {ops::Mul(s, g[0], ops::Mul(s, ScalarConst(s, -0.5, y.dtype()), y3))};
  return Done(s);
}
GRAD_FN(ExpGrad) {
  *out = {ops::Mul(s, g[0], Out(s, op, 0))};
  return Done(s);
}
GRAD_FN(LogGrad) {
  *out = {ops::Div(s, g[0], Input(s, op, 0))};
  return Done(s);
}
GRAD_FN(AbsGrad) {
  *out = {ops::Mul(s, g[0], Out(s, ops::Raw(s, "Sign", {Input(s, op, 0)})))};
  return Done(s);
}
GRAD_FN(SignGrad) {
  *out = {ops::ZerosLike(s, Input(s, op, 0))};
  return Done(s);
}

GRAD_FN(AddNGrad) {
  out->assign(static_cast<size_t>(op.node()->num_inputs()), g[0]);
  return Done(s);
}

GRAD_FN(CastGrad) {
  const Node* n = op.node();
  if (grad::IsDifferentiable(n->input_type(0)) && grad::IsDifferentiable(n->output_type(0))) {
    *out = {ops::Cast(s, g[0], n->input_type(0))};
  } else {
    *out = {Output()};
  }
  return Done(s);
}

GRAD_FN(SelectGrad) {
  Output c = Input(s, op, 0);
  Output zeros = ops::ZerosLike(s, g[0]);
  *out = {Output(), ops::Select(s, c, g[0], zeros), ops::Select(s, c, zeros, g[0])};
  return Done(s);
}

GRAD_FN(MatMulGrad) {
  const bool ta = grad::AttrBool(op.node(), "transpose_a", false);
  const bool tb = grad::AttrBool(op.node(), "transpose_b", false);
  Output a = Input(s, op, 0), b = Input(s, op, 1);
  const Output& d = g[0];
  Output ga, gb;
  if (!ta && !tb) {
    ga = ops::MatMul(s, d, b, false, true);
    gb = ops::MatMul(s, a, d, true, false);
  } else if (!ta && tb) {
    ga = ops::MatMul(s, d, b, false, false);
    gb = ops::MatMul(s, d, a, true, false);
  } else if (ta && !tb) {
    ga = ops::MatMul(s, b, d, false, true);
    gb = ops::MatMul(s, a, d, false, false);
  } else {
    ga = ops::MatMul(s, b, d, true, true);
    gb = ops::MatMul(s, d, a, true, true);
  }
  *out = {ga, gb};
  return Done(s);
}

// g (the reduction's output gradient) broadcast back to x's shape; also
// returns the kept-dims shape.
Output BroadcastReduced(const Scope& s, const Output& x, const Output& axes, const Output& g, Output* kept_shape) {
  Output shape = ops::Shape(s, x);
  Output kept = Out(s, ops::Raw(s, "ReducedShape", {shape, axes}));
  if (kept_shape != nullptr) *kept_shape = kept;
  return Out(s, ops::Raw(s, "BroadcastTo", {ops::Reshape(s, g, kept), shape}));
}

GRAD_FN(SumGrad) {
  *out = {BroadcastReduced(s, Input(s, op, 0), Input(s, op, 1), g[0], nullptr), Output()};
  return Done(s);
}

GRAD_FN(MeanGrad) {
  Output x = Input(s, op, 0);
  Output sum_grad = BroadcastReduced(s, x, Input(s, op, 1), g[0], nullptr);
  Output count = ops::Div(s, ops::Size(s, x), ops::Size(s, Out(s, op, 0)));
  *out = {ops::Div(s, sum_grad, ops::Cast(s, count, x.dtype())), Output()};
  return Done(s);
}

// Max and Min: the gradient is split evenly between the elements equal to
// the result (TensorFlow's indicator approach).
GRAD_FN(MaxMinReduceGrad) {
  Output x = Input(s, op, 0), axes = Input(s, op, 1);
  Output kept = Out(s, ops::Raw(s, "ReducedShape", {ops::Shape(s, x), axes}));
  Output y = ops::Reshape(s, Out(s, op, 0), kept);
  Output gk = ops::Reshape(s, g[0], kept);
  Output ind = ops::Cast(s, ops::Equal(s, x, y), x.dtype());
  Output num = SumAxes(s, ind, axes, /*keep_dims=*/true);
  *out = {ops::Mul(s, ops::Div(s, ind, num), gk), Output()};
  return Done(s);
}

// Prod: g times the product of the other elements of each reduction group
// (ReduceProdGrad computes that exactly, zeros included).
GRAD_FN(ProdGrad) {
  Output x = Input(s, op, 0), axes = Input(s, op, 1);
  Output bg = BroadcastReduced(s, x, axes, g[0], nullptr);
  *out = {ops::Mul(s, bg, Out(s, ops::Raw(s, "ReduceProdGrad", {x, axes}))), Output()};
  return Done(s);
}

#undef GRAD_FN

}  // namespace

void RegisterMathGradients(GradientRegistry* r) {
  r->Register("Identity", IdentityGrad);
  r->Register("PlaceholderWithDefault", IdentityGrad);
  r->Register("Add", AddGrad);
  r->Register("Sub", SubGrad);
  r->Register("Mul", MulGrad);
  r->Register("Div", DivGrad);
  r->Register("Pow", PowGrad);
  r->Register("Maximum", MaximumGrad);
  r->Register("Minimum", MinimumGrad);
  r->Register("Neg", NegGrad);
  r->Register("Square", SquareGrad);
  r->Register("Sqrt", SqrtGrad);
  r->Register("Rsqrt", RsqrtGrad);
  r->Register("Exp", ExpGrad);
  r->Register("Log", LogGrad);
  r->Register("Abs", AbsGrad);
  r->Register("Sign", SignGrad);
  r->Register("AddN", AddNGrad);
  r->Register("Cast", CastGrad);
  r->Register("Select", SelectGrad);
  r->Register("MatMul", MatMulGrad);
  r->Register("Sum", SumGrad);
  r->Register("Mean", MeanGrad);
  r->Register("Max", MaxMinReduceGrad);
  r->Register("Min", MaxMinReduceGrad);
  r->Register("Prod", ProdGrad);
  for (const char* op : {"Equal", "NotEqual", "Less", "LessEqual", "Greater", "GreaterEqual", "LogicalAnd", "LogicalOr",
                         "LogicalNot", "ArgMax", "ArgMin"}) {
    r->RegisterNoGradient(op);
  }
}

}  // namespace distflow
