// Conv2D and its backprops (NHWC); registered from RegisterNnKernels.
// Pooling is in pool_kernels.cc.
//
// float32 convolutions run on oneDNN primitives. Each kernel caches, per
// (thread count, input shape, filter shape), the primitive (and the forward
// primitive descriptor it needs as a hint). Activations are given to oneDNN
// as plain NHWC (in one back-to-back run on a shared 2-core machine, ~60 vs
// ~80 ms for the book CNN's convs compared with letting oneDNN pick blocked
// layouts and reordering every step; the timings were noisy); weights use
// format_tag::any, with a cached reorder from/to the user's HWIO when the
// primitive prefers a blocked layout. Execution uses a
// user-provided scratchpad, so concurrent steps may share a primitive. The
// OpenMP thread count is set to the intra-op parallelism (gemm.h).
//
// double convolutions use direct loops.
#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "base/status_macros.h"
#include "graph/attr_value.h"
#include "graph/window.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/window_geometry.h"
#include "kernels/kernel_registry.h"
#include "oneapi/dnnl/dnnl.hpp"

namespace distflow {
namespace {

using window_geometry::Geom;
using window_geometry::MakeGeom;
using window_geometry::SizesInput;

// ---------------------------------------------------------------------------
// Direct (loop) convolutions, for double.

enum class ConvKind { kForward, kBackpropInput, kBackpropFilter };

template <typename T>
void DirectConvForward(OpKernelContext* ctx, const Geom& g, const T* x, const T* f, T* y) {
  ctx->ParallelFor(g.n * g.oh, g.ow * g.kh * g.kw * g.c * g.o * 2 + 1, [&](int64_t b, int64_t e) {
    for (int64_t row = b; row < e; ++row) {
      const int64_t n = row / g.oh, oh = row % g.oh;
      for (int64_t ow = 0; ow < g.ow; ++ow) {
        T* out = y + ((n * g.oh + oh) * g.ow + ow) * g.o;
        std::fill(out, out + g.o, T(0));
        for (int64_t i = 0; i < g.kh; ++i) {
          const int64_t ih = oh * g.sh - g.pt + i;
          if (ih < 0 || ih >= g.h) continue;
          for (int64_t j = 0; j < g.kw; ++j) {
            const int64_t iw = ow * g.sw - g.pl + j;
            if (iw < 0 || iw >= g.w) continue;
            const T* in = x + ((n * g.h + ih) * g.w + iw) * g.c;
            const T* fk = f + (i * g.kw + j) * g.c * g.o;
            for (int64_t c = 0; c < g.c; ++c) {
              const T v = in[c];
              const T* fr = fk + c * g.o;
              for (int64_t o = 0; o < g.o; ++o) out[o] += v * fr[o];
            }
          }
        }
      }
    }
  });
}

template <typename T>
void DirectConvBackpropInput(OpKernelContext* ctx, const Geom& g, const T* f, const T* dy, T* dx) {
  ctx->ParallelFor(g.n, g.oh * g.ow * g.kh * g.kw * g.c * g.o * 2 + 1, [&](int64_t b, int64_t e) {
    for (int64_t n = b; n < e; ++n) {
      std::fill(dx + n * g.h * g.w * g.c, dx + (n + 1) * g.h * g.w * g.c, T(0));
      for (int64_t oh = 0; oh < g.oh; ++oh) {
        for (int64_t ow = 0; ow < g.ow; ++ow) {
          const T* gy = dy + ((n * g.oh + oh) * g.ow + ow) * g.o;
          for (int64_t i = 0; i < g.kh; ++i) {
            const int64_t ih = oh * g.sh - g.pt + i;
            if (ih < 0 || ih >= g.h) continue;
            for (int64_t j = 0; j < g.kw; ++j) {
              const int64_t iw = ow * g.sw - g.pl + j;
              if (iw < 0 || iw >= g.w) continue;
              T* gx = dx + ((n * g.h + ih) * g.w + iw) * g.c;
              const T* fk = f + (i * g.kw + j) * g.c * g.o;
              for (int64_t c = 0; c < g.c; ++c) {
                const T* fr = fk + c * g.o;
                T s = 0;
                for (int64_t o = 0; o < g.o; ++o) s += gy[o] * fr[o];
                gx[c] += s;
              }
            }
          }
        }
      }
    }
  });
}

template <typename T>
void DirectConvBackpropFilter(OpKernelContext* ctx, const Geom& g, const T* x, const T* dy, T* df) {
  ctx->ParallelFor(g.kh * g.kw, g.n * g.oh * g.ow * g.c * g.o * 2 + 1, [&](int64_t b, int64_t e) {
    for (int64_t k = b; k < e; ++k) {
      const int64_t i = k / g.kw, j = k % g.kw;
      T* fk = df + k * g.c * g.o;
      std::fill(fk, fk + g.c * g.o, T(0));
      for (int64_t n = 0; n < g.n; ++n) {
        for (int64_t oh = 0; oh < g.oh; ++oh) {
          const int64_t ih = oh * g.sh - g.pt + i;
          if (ih < 0 || ih >= g.h) continue;
          for (int64_t ow = 0; ow < g.ow; ++ow) {
            const int64_t iw = ow * g.sw - g.pl + j;
            if (iw < 0 || iw >= g.w) continue;
            const T* in = x + ((n * g.h + ih) * g.w + iw) * g.c;
            const T* gy = dy + ((n * g.oh + oh) * g.ow + ow) * g.o;
            for (int64_t c = 0; c < g.c; ++c) {
              const T v = in[c];
              T* fr = fk + c * g.o;
              for (int64_t o = 0; o < g.o; ++o) fr[o] += v * gy[o];
            }
          }
        }
      }
    }
  });
}

// ---------------------------------------------------------------------------
// oneDNN convolutions, for float.

dnnl::engine& Engine() {
  static dnnl::engine* e = new dnnl::engine(dnnl::engine::kind::cpu, 0);
  return *e;
}

using Tag = dnnl::memory::format_tag;
using Md = dnnl::memory::desc;

// A primitive ready to run on plain user tensors.
struct DnnlPlan {
  struct Arg {
    int id;  // DNNL_ARG_*
    bool is_output;
    Md user;      // plain NHWC / HWIO
    Md internal;  // what the primitive wants
    bool reorder = false;
    dnnl::primitive convert;  // user -> internal for inputs, internal -> user for outputs
  };
  dnnl::primitive prim;
  std::vector<Arg> args;  // in the order the caller passes pointers
  Md scratchpad;
};

void AddArg(DnnlPlan* p, int id, bool is_output, const Md& user, const Md& internal) {
  DnnlPlan::Arg a{id, is_output, user, internal, false, dnnl::primitive()};
  if (user != internal) {
    a.reorder = true;
    a.convert = is_output
                    ? dnnl::primitive(dnnl::reorder(dnnl::reorder::primitive_desc(Engine(), internal, Engine(), user)))
                    : dnnl::primitive(dnnl::reorder(dnnl::reorder::primitive_desc(Engine(), user, Engine(), internal)));
  }
  p->args.push_back(std::move(a));
}

void RunPlan(const DnnlPlan& p, const std::vector<void*>& ptrs) {
  dnnl::engine& eng = Engine();
  dnnl::stream s(eng);
  std::unordered_map<int, dnnl::memory> args;
  std::vector<std::pair<size_t, dnnl::memory>> outputs_to_convert;
  for (size_t i = 0; i < p.args.size(); ++i) {
    const DnnlPlan::Arg& a = p.args[i];
    dnnl::memory user(a.user, eng, ptrs[i]);
    if (!a.reorder) {
      args.emplace(a.id, user);
      continue;
    }
    dnnl::memory internal(a.internal, eng);
    if (!a.is_output) {
      a.convert.execute(s, {{DNNL_ARG_FROM, user}, {DNNL_ARG_TO, internal}});
    } else {
      outputs_to_convert.emplace_back(i, user);
    }
    args.emplace(a.id, internal);
  }
  dnnl::memory scratch(p.scratchpad, eng);
  args.emplace(DNNL_ARG_SCRATCHPAD, scratch);
  p.prim.execute(s, args);
  for (auto& [i, user] : outputs_to_convert) {
    const DnnlPlan::Arg& a = p.args[i];
    a.convert.execute(s, {{DNNL_ARG_FROM, args.at(a.id)}, {DNNL_ARG_TO, user}});
  }
  s.wait();
}

DnnlPlan MakeConvPlan(ConvKind kind, const Geom& g) {
  using dnnl::memory;
  const memory::dims src_dims{g.n, g.c, g.h, g.w}, wei_dims{g.o, g.c, g.kh, g.kw}, dst_dims{g.n, g.o, g.oh, g.ow};
  const memory::dims strides{g.sh, g.sw}, pad_l{g.pt, g.pl}, pad_r{g.pb, g.pr};
  const auto f32 = memory::data_type::f32;
  const Md src_user(src_dims, f32, Tag::nhwc), wei_user(wei_dims, f32, Tag::hwio), dst_user(dst_dims, f32, Tag::nhwc);
  // NHWC activations (see the top comment); weights in the primitive's preferred layout.
  const Md src_any(src_dims, f32, Tag::nhwc), wei_any(wei_dims, f32, Tag::any), dst_any(dst_dims, f32, Tag::nhwc);
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  const dnnl::convolution_forward::desc fwd_d(dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct,
                                              src_any, wei_any, dst_any, strides, pad_l, pad_r);
  const dnnl::convolution_forward::primitive_desc fwd_pd(fwd_d, attr, Engine());
  DnnlPlan p;
  switch (kind) {
    case ConvKind::kForward:
      p.prim = dnnl::convolution_forward(fwd_pd);
      AddArg(&p, DNNL_ARG_SRC, false, src_user, fwd_pd.src_desc());
      AddArg(&p, DNNL_ARG_WEIGHTS, false, wei_user, fwd_pd.weights_desc());
      AddArg(&p, DNNL_ARG_DST, true, dst_user, fwd_pd.dst_desc());
      p.scratchpad = fwd_pd.scratchpad_desc();
      break;
    case ConvKind::kBackpropInput: {
      const dnnl::convolution_backward_data::desc d(dnnl::algorithm::convolution_direct, src_any, wei_any, dst_any,
                                                    strides, pad_l, pad_r);
      const dnnl::convolution_backward_data::primitive_desc pd(d, attr, Engine(), fwd_pd);
      p.prim = dnnl::convolution_backward_data(pd);
      AddArg(&p, DNNL_ARG_WEIGHTS, false, wei_user, pd.weights_desc());
      AddArg(&p, DNNL_ARG_DIFF_DST, false, dst_user, pd.diff_dst_desc());
      AddArg(&p, DNNL_ARG_DIFF_SRC, true, src_user, pd.diff_src_desc());
      p.scratchpad = pd.scratchpad_desc();
      break;
    }
    case ConvKind::kBackpropFilter: {
      const dnnl::convolution_backward_weights::desc d(dnnl::algorithm::convolution_direct, src_any, wei_any, dst_any,
                                                       strides, pad_l, pad_r);
      const dnnl::convolution_backward_weights::primitive_desc pd(d, attr, Engine(), fwd_pd);
      p.prim = dnnl::convolution_backward_weights(pd);
      AddArg(&p, DNNL_ARG_SRC, false, src_user, pd.src_desc());
      AddArg(&p, DNNL_ARG_DIFF_DST, false, dst_user, pd.diff_dst_desc());
      AddArg(&p, DNNL_ARG_DIFF_WEIGHTS, true, wei_user, pd.diff_weights_desc());
      p.scratchpad = pd.scratchpad_desc();
      break;
    }
  }
  return p;
}

// Conv2D (input, filter), Conv2DBackpropInput (input_sizes, filter,
// out_backprop), Conv2DBackpropFilter (input, filter_sizes, out_backprop).
template <typename T, ConvKind K>
class ConvOp : public OpKernel {
 public:
  using OpKernel::OpKernel;

  // Never small enough to run on a thread the executor does not own.
  int64_t EstimatedWork(const std::vector<TensorShape>&) const override { return -1; }

  absl::Status Init(OpKernelConstruction* c) override {
    ASSIGN_OR_RETURN(WindowAttrs a, ReadWindowAttrs(c->def(), false));
    attrs_ = a;
    return absl::OkStatus();
  }

  absl::Status Compute(OpKernelContext* ctx) override {
    TensorShape in_shape, filter_shape, out_shape;
    const Tensor* x = nullptr;
    const Tensor* f = nullptr;
    const Tensor* dy = nullptr;
    if constexpr (K == ConvKind::kForward) {
      x = &ctx->input(0);
      f = &ctx->input(1);
      in_shape = x->shape();
      filter_shape = f->shape();
    } else if constexpr (K == ConvKind::kBackpropInput) {
      ASSIGN_OR_RETURN(TensorShape s, SizesInput(ctx->input(0), "input_sizes"));
      in_shape = s;
      f = &ctx->input(1);
      filter_shape = f->shape();
      dy = &ctx->input(2);
    } else {
      x = &ctx->input(0);
      ASSIGN_OR_RETURN(TensorShape s, SizesInput(ctx->input(1), "filter_sizes"));
      filter_shape = s;
      in_shape = x->shape();
      dy = &ctx->input(2);
    }
    if (in_shape.dims() != 4 || filter_shape.dims() != 4) {
      return absl::InvalidArgumentError(absl::StrCat("input and filter must be 4-D: input ", in_shape.DebugString(),
                                                     ", filter ", filter_shape.DebugString()));
    }
    if (in_shape.dim_size(3) != filter_shape.dim_size(2)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "input depth must equal filter in-channels: input ", in_shape.DebugString(), " has ", in_shape.dim_size(3),
          " channels, filter ", filter_shape.DebugString(), " has ", filter_shape.dim_size(2)));
    }
    ASSIGN_OR_RETURN(Geom gs, MakeGeom(in_shape, filter_shape.dim_size(0), filter_shape.dim_size(1),
                                       filter_shape.dim_size(3), attrs_, "filter"));
    const Geom& g = gs;
    const TensorShape y_shape({g.n, g.oh, g.ow, g.o});
    if (dy != nullptr && dy->shape() != y_shape) {
      return absl::InvalidArgumentError(absl::StrCat(
          "out_backprop has shape ", dy->shape().DebugString(), " but the convolution of input ",
          in_shape.DebugString(), " with filter ", filter_shape.DebugString(), " gives ", y_shape.DebugString()));
    }
    out_shape = K == ConvKind::kForward ? y_shape : K == ConvKind::kBackpropInput ? in_shape : filter_shape;
    ASSIGN_OR_RETURN(Tensor * out, ctx->allocate_output(0, out_shape));
    T* op = out->template flat<T>().data();
    if (out->NumElements() == 0) return absl::OkStatus();
    if (in_shape.num_elements() == 0 || filter_shape.num_elements() == 0 || y_shape.num_elements() == 0) {
      std::fill(op, op + out->NumElements(), T(0));
      return absl::OkStatus();
    }
    if constexpr (std::is_same_v<T, float>) {
      const int threads = IntraOpParallelism(ctx->intra_op_pool());
      ScopedOmpThreads omp(threads);
      try {
        std::shared_ptr<const DnnlPlan> plan = GetPlan(g, threads);
        std::vector<void*> ptrs;
        auto p = [](const Tensor* t) { return const_cast<void*>(t->raw_data()); };
        if constexpr (K == ConvKind::kForward) {
          ptrs = {p(x), p(f), op};
        } else if constexpr (K == ConvKind::kBackpropInput) {
          ptrs = {p(f), p(dy), op};
        } else {
          ptrs = {p(x), p(dy), op};
        }
        RunPlan(*plan, ptrs);
      } catch (const dnnl::error& e) {
        return absl::InternalError(absl::StrCat("oneDNN ", type_string(), " failed: ", e.what(), " (status ",
                                                static_cast<int>(e.status), ")"));
      }
    } else {
      if constexpr (K == ConvKind::kForward) {
        DirectConvForward<T>(ctx, g, x->flat<T>().data(), f->flat<T>().data(), op);
      } else if constexpr (K == ConvKind::kBackpropInput) {
        DirectConvBackpropInput<T>(ctx, g, f->flat<T>().data(), dy->flat<T>().data(), op);
      } else {
        DirectConvBackpropFilter<T>(ctx, g, x->flat<T>().data(), dy->flat<T>().data(), op);
      }
    }
    return absl::OkStatus();
  }

 private:
  using Key = std::array<int64_t, 8>;

  std::shared_ptr<const DnnlPlan> GetPlan(const Geom& g, int threads) const {
    const Key key{threads, g.n, g.h, g.w, g.c, g.kh, g.kw, g.o};
    absl::MutexLock l(&mu_);
    auto it = plans_.find(key);
    if (it != plans_.end()) return it->second;
    auto plan = std::make_shared<const DnnlPlan>(MakeConvPlan(K, g));
    plans_.emplace(key, plan);
    return plan;
  }

  WindowAttrs attrs_;
  mutable absl::Mutex mu_;
  mutable std::map<Key, std::shared_ptr<const DnnlPlan>> plans_ ABSL_GUARDED_BY(mu_);
};

template <typename T>
void RegisterType(KernelRegistry* r, DataType dt) {
  r->Register<ConvOp<T, ConvKind::kForward>>("Conv2D", kCpu, dt);
  r->Register<ConvOp<T, ConvKind::kBackpropInput>>("Conv2DBackpropInput", kCpu, dt);
  r->Register<ConvOp<T, ConvKind::kBackpropFilter>>("Conv2DBackpropFilter", kCpu, dt);
}

}  // namespace

void RegisterConvKernels(KernelRegistry* r) {
  RegisterType<float>(r, DT_FLOAT);
  RegisterType<double>(r, DT_DOUBLE);
}

}  // namespace distflow
