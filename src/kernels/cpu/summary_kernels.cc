// Kernels of the summary ops (graph/ops/summary_ops.cc). Each builds a
// tensorboard::Summary and outputs it serialized in a scalar string.
#include <algorithm>
#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "graph/attr_value.h"
#include "kernels/cpu/histogram.h"
#include "kernels/cpu/png_encoder.h"
#include "kernels/kernel_registry.h"
#include "proto/summary.pb.h"

namespace distflow {
namespace {

using tensorboard::Summary;

absl::Status OutputSummary(OpKernelContext* ctx, const Summary& s) {
  ASSIGN_OR_RETURN(Tensor * out, ctx->allocate_output(0, TensorShape()));
  out->flat<std::string>()[0] = s.SerializeAsString();
  return absl::OkStatus();
}

absl::StatusOr<std::string> ScalarString(const Tensor& t, absl::string_view what) {
  if (t.dtype() != DT_STRING || t.NumElements() != 1 || t.dims() != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", what, "' must be a scalar string, got shape ", t.shape().DebugString()));
  }
  return t.flat<std::string>()[0];
}

// Every element of a numeric tensor as a double.
absl::StatusOr<std::vector<double>> AsDoubles(const Tensor& t) {
  std::vector<double> out(static_cast<size_t>(t.NumElements()));
  auto copy = [&](auto values) {
    for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<double>(values[i]);
  };
  switch (t.dtype()) {
    case DT_FLOAT:
      copy(t.flat<float>());
      break;
    case DT_DOUBLE:
      copy(t.flat<double>());
      break;
    case DT_INT32:
      copy(t.flat<int32_t>());
      break;
    case DT_INT64:
      copy(t.flat<int64_t>());
      break;
    case DT_UINT8:
      copy(t.flat<uint8_t>());
      break;
    default:
      return absl::InvalidArgumentError(absl::StrCat("summaries of ", DataTypeName(t.dtype()), " are not supported"));
  }
  return out;
}

class ScalarSummaryOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  bool IsExpensive() const override { return false; }
  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& tags = ctx->input(0);
    const Tensor& values = ctx->input(1);
    if (tags.shape() != values.shape()) {
      return absl::InvalidArgumentError(
          absl::StrCat("tags and values must have the same shape, got tags ", tags.shape().DebugString(),
                       " and values ", values.shape().DebugString(), " (tf.summary.scalar takes one scalar value)"));
    }
    ASSIGN_OR_RETURN(std::vector<double> v, AsDoubles(values));
    Summary s;
    auto tag = tags.flat<std::string>();
    for (size_t i = 0; i < v.size(); ++i) {
      Summary::Value* value = s.add_value();
      value->set_tag(tag[i]);
      value->set_simple_value(static_cast<float>(v[i]));
    }
    return OutputSummary(ctx, s);
  }
};

class HistogramSummaryOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext* ctx) override {
    ASSIGN_OR_RETURN(std::string tag, ScalarString(ctx->input(0), "tag"));
    ASSIGN_OR_RETURN(std::vector<double> v, AsDoubles(ctx->input(1)));
    Histogram h;
    for (double x : v) {
      if (!std::isfinite(x)) {
        return absl::InvalidArgumentError(absl::StrCat("Nan or Inf in summary histogram for: ", tag));
      }
      h.Add(x);
    }
    Summary s;
    Summary::Value* value = s.add_value();
    value->set_tag(tag);
    h.EncodeToProto(value->mutable_histo());
    return OutputSummary(ctx, s);
  }
};

class ImageSummaryOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Init(OpKernelConstruction* c) override {
    ASSIGN_OR_RETURN(int64_t max_images, GetAttrInt(c->def(), "max_images"));
    if (max_images < 1) return absl::InvalidArgumentError(absl::StrCat("max_images must be >= 1, got ", max_images));
    max_images_ = max_images;
    ASSIGN_OR_RETURN(std::vector<int64_t> bad, GetAttrIntList(c->def(), "bad_color"));
    if (!bad.empty()) {
      if (bad.size() > 4) return absl::InvalidArgumentError("bad_color has at most 4 channels");
      for (size_t i = 0; i < 4; ++i) bad_color_[i] = static_cast<uint8_t>(i < bad.size() ? bad[i] : 255);
    }
    return absl::OkStatus();
  }

  absl::Status Compute(OpKernelContext* ctx) override {
    ASSIGN_OR_RETURN(std::string tag, ScalarString(ctx->input(0), "tag"));
    const Tensor& t = ctx->input(1);
    if (t.dims() != 4 || (t.dim_size(3) != 1 && t.dim_size(3) != 3 && t.dim_size(3) != 4)) {
      return absl::InvalidArgumentError(
          absl::StrCat("Image summary '", tag, "': images must be [batch, height, width, 1, 3 or 4 channels], got ",
                       t.shape().DebugString()));
    }
    const int64_t batch = t.dim_size(0), height = t.dim_size(1), width = t.dim_size(2);
    const int channels = static_cast<int>(t.dim_size(3));
    const int64_t pixels = height * width;
    if (pixels == 0 || height >= (int64_t{1} << 27) || width >= (int64_t{1} << 27)) {
      return absl::InvalidArgumentError(
          absl::StrCat("Image summary '", tag, "': cannot write ", height, "x", width, " images"));
    }
    Summary s;
    std::vector<uint8_t> image(static_cast<size_t>(pixels * channels));
    for (int64_t i = 0; i < std::min(batch, max_images_); ++i) {
      const size_t offset = static_cast<size_t>(i * pixels * channels);
      if (t.dtype() == DT_UINT8) {
        std::copy_n(t.flat<uint8_t>().data() + offset, image.size(), image.begin());
      } else if (t.dtype() == DT_FLOAT) {
        ToUint8(t.flat<float>().data() + offset, pixels, channels, image.data());
      } else if (t.dtype() == DT_DOUBLE) {
        ToUint8(t.flat<double>().data() + offset, pixels, channels, image.data());
      } else {
        return absl::InvalidArgumentError(
            absl::StrCat("Image summary '", tag, "': images of ", DataTypeName(t.dtype()), " are not supported"));
      }
      ASSIGN_OR_RETURN(std::string png, EncodePng(image.data(), width, height, channels));
      Summary::Value* value = s.add_value();
      value->set_tag(max_images_ > 1 ? absl::StrCat(tag, "/image/", i) : absl::StrCat(tag, "/image"));
      Summary::Image* img = value->mutable_image();
      img->set_height(static_cast<int32_t>(height));
      img->set_width(static_cast<int32_t>(width));
      img->set_colorspace(channels);
      img->set_encoded_image_string(std::move(png));
    }
    return OutputSummary(ctx, s);
  }

 private:
  // Scales one image's floats into bytes (see the op's comment); a pixel
  // with any non-finite channel becomes bad_color.
  template <typename T>
  void ToUint8(const T* values, int64_t pixels, int channels, uint8_t* out) const {
    auto finite = [&](int64_t p) {
      for (int c = 0; c < channels; ++c) {
        if (!std::isfinite(values[p * channels + c])) return false;
      }
      return true;
    };
    double lo = INFINITY, hi = -INFINITY;
    for (int64_t p = 0; p < pixels; ++p) {
      if (!finite(p)) continue;
      for (int c = 0; c < channels; ++c) {
        lo = std::min(lo, static_cast<double>(values[p * channels + c]));
        hi = std::max(hi, static_cast<double>(values[p * channels + c]));
      }
    }
    constexpr double kZero = 1e-6;
    double scale, offset;
    if (lo < 0) {
      double max_abs = std::max(std::abs(lo), std::abs(hi));
      scale = max_abs < kZero ? 0.0 : 127.0 / max_abs;
      offset = 128.0;
    } else {
      scale = hi < kZero ? 0.0 : 255.0 / hi;
      offset = 0.0;
    }
    for (int64_t p = 0; p < pixels; ++p) {
      bool ok = finite(p);
      for (int c = 0; c < channels; ++c) {
        double v = static_cast<double>(values[p * channels + c]) * scale + offset;
        out[p * channels + c] = ok ? static_cast<uint8_t>(std::clamp(v, 0.0, 255.0)) : bad_color_[c];
      }
    }
  }

  int64_t max_images_ = 3;
  uint8_t bad_color_[4] = {255, 0, 0, 255};
};

class TensorSummaryV2Op : public OpKernel {
 public:
  using OpKernel::OpKernel;
  bool IsExpensive() const override { return false; }
  absl::Status Compute(OpKernelContext* ctx) override {
    ASSIGN_OR_RETURN(std::string tag, ScalarString(ctx->input(0), "tag"));
    ASSIGN_OR_RETURN(std::string meta, ScalarString(ctx->input(2), "serialized_summary_metadata"));
    Summary s;
    Summary::Value* value = s.add_value();
    value->set_tag(tag);
    if (!value->mutable_metadata()->ParseFromString(meta)) {
      return absl::InvalidArgumentError(
          absl::StrCat("Summary '", tag, "': serialized_summary_metadata is not a SummaryMetadata"));
    }
    RETURN_IF_ERROR(ToTensorProto(ctx->input(1), value->mutable_tensor()));
    return OutputSummary(ctx, s);
  }

 private:
  static absl::Status ToTensorProto(const Tensor& t, tensorboard::TensorProto* out) {
    for (int64_t d : t.shape().dim_sizes()) out->mutable_tensor_shape()->add_dim()->set_size(d);
    auto bytes = [&](auto values, tensorboard::DataType dt) {
      out->set_dtype(dt);
      out->set_tensor_content(
          std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(values[0])));
    };
    switch (t.dtype()) {
      case DT_STRING:
        out->set_dtype(tensorboard::DT_STRING);
        for (const std::string& s : t.flat<std::string>()) out->add_string_val(s);
        break;
      case DT_FLOAT:
        bytes(t.flat<float>(), tensorboard::DT_FLOAT);
        break;
      case DT_DOUBLE:
        bytes(t.flat<double>(), tensorboard::DT_DOUBLE);
        break;
      case DT_INT32:
        bytes(t.flat<int32_t>(), tensorboard::DT_INT32);
        break;
      case DT_INT64:
        bytes(t.flat<int64_t>(), tensorboard::DT_INT64);
        break;
      case DT_UINT8:
        bytes(t.flat<uint8_t>(), tensorboard::DT_UINT8);
        break;
      case DT_BOOL:
        bytes(t.flat<bool>(), tensorboard::DT_BOOL);
        break;
      default:
        return absl::InvalidArgumentError(
            absl::StrCat("tensor summaries of ", DataTypeName(t.dtype()), " are not supported"));
    }
    return absl::OkStatus();
  }
};

class MergeSummaryOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  bool IsExpensive() const override { return false; }
  absl::Status Compute(OpKernelContext* ctx) override {
    Summary merged;
    std::set<std::string> tags;
    for (int i = 0; i < ctx->num_inputs(); ++i) {
      const Tensor& in = ctx->input(i);
      for (const std::string& bytes : in.flat<std::string>()) {
        Summary s;
        if (!s.ParseFromString(bytes)) {
          return absl::InvalidArgumentError(absl::StrCat("input ", i, " is not a serialized Summary"));
        }
        for (Summary::Value& v : *s.mutable_value()) {
          if (!v.tag().empty() && !tags.insert(v.tag()).second) {
            return absl::InvalidArgumentError(absl::StrCat("duplicate tag ", v.tag(), " found in summary inputs"));
          }
          *merged.add_value() = std::move(v);
        }
      }
    }
    return OutputSummary(ctx, merged);
  }
};

}  // namespace

void RegisterSummaryKernels(KernelRegistry* r) {
  r->Register<ScalarSummaryOp>("ScalarSummary", kCpu, DT_INVALID);
  r->Register<HistogramSummaryOp>("HistogramSummary", kCpu, DT_INVALID);
  r->Register<ImageSummaryOp>("ImageSummary", kCpu, DT_INVALID);
  r->Register<TensorSummaryV2Op>("TensorSummaryV2", kCpu, DT_INVALID);
  r->Register<MergeSummaryOp>("MergeSummary", kCpu, DT_INVALID);
}

}  // namespace distflow
