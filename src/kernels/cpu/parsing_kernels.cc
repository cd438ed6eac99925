// Kernels of the parsing ops (graph/ops/parsing_ops.cc): DecodeRaw and
// ParseExample (tf.train.Example, proto/example.proto). A malformed or
// mismatched example is an error naming the key, the example's index and
// what was expected, never a crash.
#include <cstring>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "graph/attr_value.h"
#include "graph/shape_rules.h"
#include "kernels/kernel_registry.h"
#include "proto/example.pb.h"

namespace distflow {
namespace {

class DecodeRawOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Init(OpKernelConstruction* c) override {
    ASSIGN_OR_RETURN(type_, GetAttrType(c->def(), "out_type"));
    ASSIGN_OR_RETURN(little_endian_, GetAttrBool(c->def(), "little_endian"));
    return absl::OkStatus();
  }
  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& in = ctx->input(0);
    const size_t size = DataTypeSize(type_);
    auto strings = in.flat<std::string>();
    int64_t width = strings.empty() ? 0 : static_cast<int64_t>(strings[0].size());
    for (size_t i = 0; i < strings.size(); ++i) {
      if (static_cast<int64_t>(strings[i].size()) != width) {
        return absl::InvalidArgumentError(absl::StrCat("DecodeRaw needs strings of one length; string 0 has ", width,
                                                       " bytes, string ", i, " has ", strings[i].size()));
      }
    }
    if (width % static_cast<int64_t>(size) != 0) {
      return absl::InvalidArgumentError(absl::StrCat("DecodeRaw: a string of ", width,
                                                     " bytes is not a whole number of ", DataTypeName(type_),
                                                     " values (", size, " bytes each)"));
    }
    std::vector<int64_t> dims(in.shape().dim_sizes().begin(), in.shape().dim_sizes().end());
    dims.push_back(width / static_cast<int64_t>(size));
    ASSIGN_OR_RETURN(Tensor * out, ctx->allocate_output(0, TensorShape(dims)));
    char* dst = static_cast<char*>(out->raw_data());
    const bool swap = !little_endian_ && size > 1;
    for (size_t i = 0; i < strings.size(); ++i) {
      char* row = dst + i * static_cast<size_t>(width);
      std::memcpy(row, strings[i].data(), static_cast<size_t>(width));
      if (swap) {
        for (int64_t k = 0; k < width; k += static_cast<int64_t>(size)) std::reverse(row + k, row + k + size);
      }
    }
    return absl::OkStatus();
  }

 private:
  DataType type_ = DT_UINT8;
  bool little_endian_ = true;
};

// The values of one feature as `type`, appended to `out`.
template <typename T>
absl::Status AppendValues(const tfexample::Feature& f, std::vector<T>* out) {
  if constexpr (std::is_same_v<T, std::string>) {
    if (f.kind_case() != tfexample::Feature::kBytesList) return absl::InvalidArgumentError("holds no bytes_list");
    out->insert(out->end(), f.bytes_list().value().begin(), f.bytes_list().value().end());
  } else if constexpr (std::is_same_v<T, float>) {
    if (f.kind_case() != tfexample::Feature::kFloatList) return absl::InvalidArgumentError("holds no float_list");
    out->insert(out->end(), f.float_list().value().begin(), f.float_list().value().end());
  } else if constexpr (std::is_same_v<T, int64_t>) {
    if (f.kind_case() != tfexample::Feature::kInt64List) return absl::InvalidArgumentError("holds no int64_list");
    out->insert(out->end(), f.int64_list().value().begin(), f.int64_list().value().end());
  } else {
    return absl::InvalidArgumentError("has an unsupported dtype");
  }
  return absl::OkStatus();
}

bool IsEmptyFeature(const tfexample::Feature& f) {
  switch (f.kind_case()) {
    case tfexample::Feature::kBytesList:
      return f.bytes_list().value_size() == 0;
    case tfexample::Feature::kFloatList:
      return f.float_list().value_size() == 0;
    case tfexample::Feature::kInt64List:
      return f.int64_list().value_size() == 0;
    default:
      return true;
  }
}

class ParseExampleOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Init(OpKernelConstruction* c) override {
    ASSIGN_OR_RETURN(sparse_keys_, GetAttrStringList(c->def(), "sparse_keys"));
    ASSIGN_OR_RETURN(dense_keys_, GetAttrStringList(c->def(), "dense_keys"));
    ASSIGN_OR_RETURN(sparse_types_, GetAttrTypeList(c->def(), "sparse_types"));
    ASSIGN_OR_RETURN(dense_types_, GetAttrTypeList(c->def(), "Tdense"));
    ASSIGN_OR_RETURN(std::vector<int64_t> flat, GetAttrIntList(c->def(), "dense_shapes"));
    ASSIGN_OR_RETURN(std::vector<PartialShape> shapes, DecodeShapeList(flat, "attribute 'dense_shapes'"));
    for (const PartialShape& s : shapes) {
      ASSIGN_OR_RETURN(TensorShape t, s.ToTensorShape());
      dense_shapes_.push_back(t);
    }
    if (sparse_keys_.size() != sparse_types_.size() || dense_keys_.size() != dense_types_.size() ||
        dense_keys_.size() != dense_shapes_.size()) {
      return absl::InvalidArgumentError("ParseExample needs one type per key and one shape per dense key");
    }
    for (DataType t : sparse_types_)
      if (t != DT_STRING && t != DT_FLOAT && t != DT_INT64)
        return absl::InvalidArgumentError(absl::StrCat("Features are string, float32 or int64, not ", DataTypeName(t)));
    for (DataType t : dense_types_)
      if (t != DT_STRING && t != DT_FLOAT && t != DT_INT64)
        return absl::InvalidArgumentError(absl::StrCat("Features are string, float32 or int64, not ", DataTypeName(t)));
    return absl::OkStatus();
  }

  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& serialized = ctx->input(0);
    if (serialized.dims() != 1) {
      return absl::InvalidArgumentError(absl::StrCat("ParseExample takes a vector of serialized examples, got shape ",
                                                     serialized.shape().DebugString()));
    }
    const int64_t batch = serialized.dim_size(0);
    std::vector<tfexample::Example> examples(static_cast<size_t>(batch));
    for (int64_t b = 0; b < batch; ++b) {
      if (!examples[static_cast<size_t>(b)].ParseFromString(serialized.flat<std::string>()[static_cast<size_t>(b)])) {
        return absl::InvalidArgumentError(absl::StrCat("Could not parse example ", b, ": not a tf.train.Example"));
      }
    }
    const int ns = static_cast<int>(sparse_keys_.size());
    for (int i = 0; i < ns; ++i) RETURN_IF_ERROR(Sparse(ctx, examples, i));
    for (size_t i = 0; i < dense_keys_.size(); ++i)
      RETURN_IF_ERROR(Dense(ctx, examples, i, 3 * ns + static_cast<int>(i)));
    return absl::OkStatus();
  }

 private:
  absl::Status Sparse(OpKernelContext* ctx, const std::vector<tfexample::Example>& examples, int i) const {
    const int ns = static_cast<int>(sparse_keys_.size());
    const std::string& key = sparse_keys_[static_cast<size_t>(i)];
    return VisitDataType(sparse_types_[static_cast<size_t>(i)], [&](auto tag) -> absl::Status {
      using T = typename decltype(tag)::type;
      std::vector<T> values;
      std::vector<int64_t> indices;
      int64_t longest = 0;
      for (size_t b = 0; b < examples.size(); ++b) {
        const auto& map = examples[b].features().feature();
        auto it = map.find(key);
        if (it == map.end() || IsEmptyFeature(it->second)) continue;
        const size_t before = values.size();
        if (absl::Status s = AppendValues<T>(it->second, &values); !s.ok()) {
          return absl::InvalidArgumentError(absl::StrCat("Feature '", key, "' of example ", b, " ", s.message(),
                                                         " (VarLenFeature of ",
                                                         DataTypeName(sparse_types_[static_cast<size_t>(i)]), ")"));
        }
        const int64_t n = static_cast<int64_t>(values.size() - before);
        longest = std::max(longest, n);
        for (int64_t k = 0; k < n; ++k) {
          indices.push_back(static_cast<int64_t>(b));
          indices.push_back(k);
        }
      }
      const int64_t total = static_cast<int64_t>(values.size());
      ASSIGN_OR_RETURN(Tensor * ind, ctx->allocate_output(i, TensorShape({total, 2})));
      std::copy(indices.begin(), indices.end(), ind->flat<int64_t>().begin());
      ASSIGN_OR_RETURN(Tensor * val, ctx->allocate_output(ns + i, TensorShape({total})));
      std::copy(values.begin(), values.end(), val->flat<T>().begin());
      return ctx->set_output(2 * ns + i,
                             Tensor::FromVector(std::vector<int64_t>{static_cast<int64_t>(examples.size()), longest}));
    });
  }

  absl::Status Dense(OpKernelContext* ctx, const std::vector<tfexample::Example>& examples, size_t i, int out) const {
    const std::string& key = dense_keys_[i];
    const TensorShape& shape = dense_shapes_[i];
    const int64_t per = shape.num_elements();
    const Tensor& def = ctx->input(1 + static_cast<int>(i));
    if (def.NumElements() != 0 && def.NumElements() != per) {
      return absl::InvalidArgumentError(absl::StrCat("The default of dense key '", key, "' has ", def.NumElements(),
                                                     " values; its shape ", shape.DebugString(), " needs ", per));
    }
    std::vector<int64_t> dims{static_cast<int64_t>(examples.size())};
    for (int64_t d : shape.dim_sizes()) dims.push_back(d);
    ASSIGN_OR_RETURN(Tensor * t, ctx->allocate_output(out, TensorShape(dims)));
    return VisitDataType(dense_types_[i], [&](auto tag) -> absl::Status {
      using T = typename decltype(tag)::type;
      auto dst = t->flat<T>();
      for (size_t b = 0; b < examples.size(); ++b) {
        const auto& map = examples[b].features().feature();
        auto it = map.find(key);
        std::vector<T> values;
        if (it == map.end() || IsEmptyFeature(it->second)) {
          if (def.NumElements() == 0) {
            return absl::InvalidArgumentError(absl::StrCat("Example ", b, " lacks feature '", key,
                                                           "', which has no default (FixedLenFeature without "
                                                           "default_value)"));
          }
          auto d = def.flat<T>();
          values.assign(d.begin(), d.end());
        } else if (absl::Status s = AppendValues<T>(it->second, &values); !s.ok()) {
          return absl::InvalidArgumentError(absl::StrCat("Feature '", key, "' of example ", b, " ", s.message(),
                                                         " (FixedLenFeature of ", DataTypeName(dense_types_[i]), ")"));
        }
        if (static_cast<int64_t>(values.size()) != per) {
          return absl::InvalidArgumentError(absl::StrCat("Feature '", key, "' of example ", b, " has ", values.size(),
                                                         " values; its FixedLenFeature shape ", shape.DebugString(),
                                                         " needs ", per));
        }
        std::copy(values.begin(), values.end(), dst.begin() + static_cast<int64_t>(b) * per);
      }
      return absl::OkStatus();
    });
  }

  std::vector<std::string> sparse_keys_, dense_keys_;
  std::vector<DataType> sparse_types_, dense_types_;
  std::vector<TensorShape> dense_shapes_;
};

}  // namespace

void RegisterParsingKernels(KernelRegistry* r) {
  r->Register<DecodeRawOp>("DecodeRaw", kCpu, DT_INVALID);
  r->Register<ParseExampleOp>("ParseExample", kCpu, DT_INVALID);
}

}  // namespace distflow
