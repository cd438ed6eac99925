// Gradients of the float unary functions of math_unary_kernels.cc
// (TensorFlow's math_grad.py): Log1p, Expm1, Reciprocal, Sin, Cos; Floor,
// Ceil and Round are piecewise constant and pass no gradient, as in TF.
#include "client/grad/grad_families.h"

namespace distflow {
namespace {

using grad::Input;
using grad::Out;
using grad::ScalarConst;

using Grads = std::vector<Output>;

#define GRAD_FN(NAME) absl::Status NAME(const Scope& s, const Operation& op, const Grads& g, Grads* out)

GRAD_FN(Log1pGrad) {
  // d log(1 + x) = 1 / (1 + x)
  Output x = Input(s, op, 0);
  *out = {ops::Div(s, g[0], ops::Add(s, ScalarConst(s, 1, x.dtype()), x))};
  return s.status();
}

GRAD_FN(Expm1Grad) {
  // d (e^x - 1) = e^x
  *out = {ops::Mul(s, g[0], ops::Exp(s, Input(s, op, 0)))};
  return s.status();
}

GRAD_FN(ReciprocalGrad) {
  // d (1 / x) = -y^2
  Output y = Out(s, op, 0);
  *out = {ops::Neg(s, ops::Mul(s, g[0], ops::Square(s, y)))};
  return s.status();
}

GRAD_FN(SinGrad) {
  *out = {ops::Mul(s, g[0], Out(s, ops::Raw(s, "Cos", {Input(s, op, 0)})))};
  return s.status();
}

GRAD_FN(CosGrad) {
  *out = {ops::Neg(s, ops::Mul(s, g[0], Out(s, ops::Raw(s, "Sin", {Input(s, op, 0)}))))};
  return s.status();
}

#undef GRAD_FN

}  // namespace

void RegisterMathUnaryGradients(GradientRegistry* r) {
  r->Register("Log1p", Log1pGrad);
  r->Register("Expm1", Expm1Grad);
  r->Register("Reciprocal", ReciprocalGrad);
  r->Register("Sin", SinGrad);
  r->Register("Cos", CosGrad);
  for (const char* op : {"Floor", "Ceil", "Round", "IsNan", "IsInf", "IsFinite"}) r->RegisterNoGradient(op);
}

}  // namespace distflow
