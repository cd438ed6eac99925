// Datasets made from other datasets: batch and padded_batch, repeat, take,
// skip, shard, shuffle, zip and concatenate (cache is cache_dataset.cc).
// Each iterator owns the iterators of its inputs and keeps its dataset alive.
#include <algorithm>
#include <atomic>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "graph/attr_value.h"
#include "kernels/data/dataset.h"
#include "kernels/data/dataset_kernels.h"
#include "kernels/kernel_registry.h"

namespace distflow {
namespace data {
namespace {

// ---- batch / padded batch ---------------------------------------------------

class BatchDataset : public Dataset {
 public:
  // `padded_shapes` empty: plain batching (every element of a batch must
  // have the same shape); else one shape per component, -1 for "the largest".
  BatchDataset(DatasetPtr input, int64_t size, bool drop, std::vector<std::vector<int64_t>> padded_shapes,
               std::vector<Tensor> padding_values)
      : Dataset(input->dtypes()),
        input_(std::move(input)),
        size_(size),
        drop_(drop),
        padded_shapes_(std::move(padded_shapes)),
        padding_values_(std::move(padding_values)) {}

  absl::StatusOr<std::unique_ptr<DatasetIterator>> MakeIterator() const override {
    DF_ASSIGN_OR_RETURN(std::shared_ptr<DatasetIterator> in, input_->MakeIterator());
    return MakeFn([self = Self<BatchDataset>(), in](Element* out, bool* end) -> absl::Status {
      std::vector<Element> rows;
      while (static_cast<int64_t>(rows.size()) < self->size_) {
        Element e;
        bool input_end = false;
        RETURN_IF_ERROR(in->GetNext(&e, &input_end));
        if (input_end) break;
        rows.push_back(std::move(e));
      }
      *end = rows.empty() || (self->drop_ && static_cast<int64_t>(rows.size()) < self->size_);
      if (*end) return absl::OkStatus();
      return self->Stack(rows, out);
    });
  }
  std::string DebugName() const override {
    return absl::StrCat(padded_shapes_.empty() ? "BatchDataset(" : "PaddedBatchDataset(", input_->DebugName(), ")");
  }

 private:
  absl::Status Stack(const std::vector<Element>& rows, Element* out) const {
    out->clear();
    const int64_t n = static_cast<int64_t>(rows.size());
    for (size_t c = 0; c < rows[0].size(); ++c) {
      const Tensor& first = rows[0][c];
      TensorShape shape = first.shape();
      if (!padded_shapes_.empty()) {
        const std::vector<int64_t>& want = padded_shapes_[c];
        if (static_cast<int>(want.size()) != shape.dims()) {
          return absl::InvalidArgumentError(absl::StrCat("padded_shapes[", c, "] has rank ", want.size(),
                                                         " but component ", c, " has shape ", shape.DebugString()));
        }
        for (int d = 0; d < shape.dims(); ++d) {
          int64_t largest = 0;
          for (const Element& r : rows) largest = std::max(largest, r[c].dim_size(d));
          if (want[static_cast<size_t>(d)] >= 0 && largest > want[static_cast<size_t>(d)]) {
            return absl::InvalidArgumentError(absl::StrCat("Component ", c, " has an element with dimension ", d,
                                                           " of ", largest, ", more than padded_shapes[", c, "]'s ",
                                                           want[static_cast<size_t>(d)]));
          }
          RETURN_IF_ERROR(shape.SetDim(d, want[static_cast<size_t>(d)] >= 0 ? want[static_cast<size_t>(d)] : largest));
        }
      }
      std::vector<int64_t> dims = {n};
      dims.insert(dims.end(), shape.dim_sizes().begin(), shape.dim_sizes().end());
      DF_ASSIGN_OR_RETURN(TensorShape batch_shape, TensorShape::FromDims(dims));
      DF_ASSIGN_OR_RETURN(Tensor batch, Tensor::Allocate(first.dtype(), batch_shape));
      if (!padded_shapes_.empty()) RETURN_IF_ERROR(Fill(padding_values_[c], &batch));
      for (int64_t i = 0; i < n; ++i) {
        const Tensor& e = rows[static_cast<size_t>(i)][c];
        if (padded_shapes_.empty() && e.shape() != first.shape()) {
          return absl::InvalidArgumentError(
              absl::StrCat("Cannot batch component ", c, ": element 0 of the batch has shape ",
                           first.shape().DebugString(), " but element ", i, " has ", e.shape().DebugString(),
                           " (padded_batch pads elements of different shapes)"));
        }
        RETURN_IF_ERROR(CopyIntoRow(e, i, &batch));
      }
      out->push_back(std::move(batch));
    }
    return absl::OkStatus();
  }

  static absl::Status Fill(const Tensor& value, Tensor* t) {
    if (value.NumElements() != 1 || value.dtype() != t->dtype()) {
      return absl::InvalidArgumentError(absl::StrCat("A padding value must be one ", DataTypeName(t->dtype()), ", got ",
                                                     DataTypeName(value.dtype()), " ", value.shape().DebugString()));
    }
    return VisitDataType(t->dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      auto f = t->flat<T>();
      std::fill(f.begin(), f.end(), value.flat<T>()[0]);
      return absl::OkStatus();
    });
  }

  const DatasetPtr input_;
  const int64_t size_;
  const bool drop_;
  const std::vector<std::vector<int64_t>> padded_shapes_;
  const std::vector<Tensor> padding_values_;
};

absl::StatusOr<bool> ScalarBool(OpKernelContext* ctx, int i, const char* what) {
  const Tensor& t = ctx->input(i);
  if (t.dtype() != DT_BOOL || t.NumElements() != 1) {
    return absl::InvalidArgumentError(absl::StrCat("'", what, "' must be one bool"));
  }
  return t.flat<bool>()[0];
}

class BatchOp : public DatasetOpKernel {
 public:
  using DatasetOpKernel::DatasetOpKernel;

 protected:
  absl::StatusOr<DatasetPtr> MakeDataset(OpKernelContext* ctx) override {
    DF_ASSIGN_OR_RETURN(DatasetPtr input, InputDataset(ctx, 0));
    DF_ASSIGN_OR_RETURN(int64_t size, ScalarInputInt(ctx, 1, "batch_size"));
    if (size <= 0) return absl::InvalidArgumentError(absl::StrCat("'batch_size' must be positive, got ", size));
    DF_ASSIGN_OR_RETURN(bool drop, ScalarBool(ctx, ctx->num_inputs() - 1, "drop_remainder"));
    std::vector<std::vector<int64_t>> shapes;
    std::vector<Tensor> values;
    if (ctx->num_inputs() > 3) {  // PaddedBatchDataset: shapes, values
      const int n = (ctx->num_inputs() - 3) / 2;
      if (n != static_cast<int>(input->dtypes().size())) {
        return absl::InvalidArgumentError(
            absl::StrCat("Got ", n, " padded shapes for a dataset of ", input->dtypes().size(), " components"));
      }
      for (int c = 0; c < n; ++c) {
        const Tensor& s = ctx->input(2 + c);
        if (s.shape().dims() != 1) return absl::InvalidArgumentError("Each padded shape must be a vector");
        auto f = s.flat<int64_t>();
        shapes.emplace_back(f.begin(), f.end());
        values.push_back(Keep(ctx->input(2 + n + c)));
        if (values.back().dtype() != input->dtypes()[static_cast<size_t>(c)]) {
          return absl::InvalidArgumentError(
              absl::StrCat("padding_values[", c, "] is ", DataTypeName(values.back().dtype()), " but component ", c,
                           " is ", DataTypeName(input->dtypes()[static_cast<size_t>(c)])));
        }
      }
    }
    return DatasetPtr(
        std::make_shared<BatchDataset>(std::move(input), size, drop, std::move(shapes), std::move(values)));
  }
};

// ---- repeat / take / skip / shard -------------------------------------------

enum class CountKind { kRepeat, kTake, kSkip };

class CountDataset : public Dataset {
 public:
  CountDataset(DatasetPtr input, CountKind kind, int64_t count)
      : Dataset(input->dtypes()), input_(std::move(input)), kind_(kind), count_(count) {}

  absl::StatusOr<std::unique_ptr<DatasetIterator>> MakeIterator() const override {
    DF_ASSIGN_OR_RETURN(std::shared_ptr<DatasetIterator> in, input_->MakeIterator());
    auto self = Self<CountDataset>();
    switch (kind_) {
      case CountKind::kTake:
        return MakeFn([self, in, taken = int64_t{0}](Element* out, bool* end) mutable -> absl::Status {
          if (self->count_ >= 0 && taken >= self->count_) {
            *end = true;
            return absl::OkStatus();
          }
          ++taken;
          return in->GetNext(out, end);
        });
      case CountKind::kSkip:
        return MakeFn([self, in, skipped = int64_t{0}](Element* out, bool* end) mutable -> absl::Status {
          while (self->count_ < 0 || skipped < self->count_) {
            ++skipped;
            RETURN_IF_ERROR(in->GetNext(out, end));
            if (*end) return absl::OkStatus();
          }
          return in->GetNext(out, end);
        });
      case CountKind::kRepeat:
        break;
    }
    // Repeat: a new pass of the input per epoch; an epoch without elements ends it.
    return MakeFn([self, in, epoch = int64_t{0}, seen = false](Element* out, bool* end) mutable -> absl::Status {
      while (true) {
        if (self->count_ >= 0 && epoch >= self->count_) {
          *end = true;
          return absl::OkStatus();
        }
        RETURN_IF_ERROR(in->GetNext(out, end));
        if (!*end) {
          seen = true;
          return absl::OkStatus();
        }
        ++epoch;
        if (!seen) {  // an empty input repeats to nothing
          *end = true;
          return absl::OkStatus();
        }
        seen = false;
        DF_ASSIGN_OR_RETURN(std::unique_ptr<DatasetIterator> next, self->input_->MakeIterator());
        in = std::move(next);
      }
    });
  }
  std::string DebugName() const override {
    const char* k = kind_ == CountKind::kRepeat ? "RepeatDataset("
                    : kind_ == CountKind::kTake ? "TakeDataset("
                                                : "SkipDataset(";
    return absl::StrCat(k, input_->DebugName(), ")");
  }

 private:
  const DatasetPtr input_;
  const CountKind kind_;
  const int64_t count_;
};

class CountOp : public DatasetOpKernel {
 public:
  CountOp(OpKernelConstruction* c, CountKind kind) : DatasetOpKernel(c), kind_(kind) {}

 protected:
  absl::StatusOr<DatasetPtr> MakeDataset(OpKernelContext* ctx) override {
    DF_ASSIGN_OR_RETURN(DatasetPtr input, InputDataset(ctx, 0));
    DF_ASSIGN_OR_RETURN(int64_t count, ScalarInputInt(ctx, 1, "count"));
    return DatasetPtr(std::make_shared<CountDataset>(std::move(input), kind_, count));
  }

 private:
  const CountKind kind_;
};

class ShardDataset : public Dataset {
 public:
  ShardDataset(DatasetPtr input, int64_t n, int64_t index)
      : Dataset(input->dtypes()), input_(std::move(input)), n_(n), index_(index) {}
  absl::StatusOr<std::unique_ptr<DatasetIterator>> MakeIterator() const override {
    DF_ASSIGN_OR_RETURN(std::shared_ptr<DatasetIterator> in, input_->MakeIterator());
    return MakeFn([self = Self<ShardDataset>(), in, i = int64_t{0}](Element* out, bool* end) mutable -> absl::Status {
      while (true) {
        RETURN_IF_ERROR(in->GetNext(out, end));
        if (*end || (i++ % self->n_) == self->index_) return absl::OkStatus();
      }
    });
  }
  std::string DebugName() const override { return absl::StrCat("ShardDataset(", input_->DebugName(), ")"); }

 private:
  const DatasetPtr input_;
  const int64_t n_, index_;
};

class ShardOp : public DatasetOpKernel {
 public:
  using DatasetOpKernel::DatasetOpKernel;

 protected:
  absl::StatusOr<DatasetPtr> MakeDataset(OpKernelContext* ctx) override {
    DF_ASSIGN_OR_RETURN(DatasetPtr input, InputDataset(ctx, 0));
    DF_ASSIGN_OR_RETURN(int64_t n, ScalarInputInt(ctx, 1, "num_shards"));
    DF_ASSIGN_OR_RETURN(int64_t index, ScalarInputInt(ctx, 2, "index"));
    if (n < 1 || index < 0 || index >= n) {
      return absl::InvalidArgumentError(
          absl::StrCat("Need 0 <= index < num_shards, got index ", index, " of ", n, " shards"));
    }
    return DatasetPtr(std::make_shared<ShardDataset>(std::move(input), n, index));
  }
};

// ---- shuffle ------------------------------------------------------------------

class ShuffleDataset : public Dataset {
 public:
  ShuffleDataset(DatasetPtr input, int64_t buffer, uint64_t seed, bool reshuffle)
      : Dataset(input->dtypes()), input_(std::move(input)), buffer_(buffer), seed_(seed), reshuffle_(reshuffle) {}

  absl::StatusOr<std::unique_ptr<DatasetIterator>> MakeIterator() const override {
    DF_ASSIGN_OR_RETURN(std::shared_ptr<DatasetIterator> in, input_->MakeIterator());
    const uint64_t pass = reshuffle_ ? passes_.fetch_add(1) : 0;
    auto rng = std::make_shared<std::mt19937_64>(seed_ + pass * 0x9E3779B97F4A7C15ULL);
    auto buf = std::make_shared<std::vector<Element>>();
    return MakeFn([self = Self<ShuffleDataset>(), in, rng, buf, input_end = false](Element* out,
                                                                                   bool* end) mutable -> absl::Status {
      while (!input_end && static_cast<int64_t>(buf->size()) < self->buffer_) {
        Element e;
        RETURN_IF_ERROR(in->GetNext(&e, &input_end));
        if (!input_end) buf->push_back(std::move(e));
      }
      *end = buf->empty();
      if (*end) return absl::OkStatus();
      std::uniform_int_distribution<size_t> pick(0, buf->size() - 1);
      const size_t i = pick(*rng);
      std::swap((*buf)[i], buf->back());
      *out = std::move(buf->back());
      buf->pop_back();
      return absl::OkStatus();
    });
  }
  std::string DebugName() const override { return absl::StrCat("ShuffleDataset(", input_->DebugName(), ")"); }

 private:
  const DatasetPtr input_;
  const int64_t buffer_;
  const uint64_t seed_;
  const bool reshuffle_;
  mutable std::atomic<uint64_t> passes_{0};
};

class ShuffleOp : public DatasetOpKernel {
 public:
  using DatasetOpKernel::DatasetOpKernel;
  absl::Status Init(OpKernelConstruction* c) override {
    absl::StatusOr<bool> r = GetAttrBool(c->def(), "reshuffle_each_iteration");
    if (r.ok()) reshuffle_ = *r;
    return absl::OkStatus();
  }

 protected:
  absl::StatusOr<DatasetPtr> MakeDataset(OpKernelContext* ctx) override {
    DF_ASSIGN_OR_RETURN(DatasetPtr input, InputDataset(ctx, 0));
    DF_ASSIGN_OR_RETURN(int64_t buffer, ScalarInputInt(ctx, 1, "buffer_size"));
    DF_ASSIGN_OR_RETURN(int64_t seed, ScalarInputInt(ctx, 2, "seed"));
    DF_ASSIGN_OR_RETURN(int64_t seed2, ScalarInputInt(ctx, 3, "seed2"));
    if (buffer <= 0) return absl::InvalidArgumentError(absl::StrCat("'buffer_size' must be positive, got ", buffer));
    uint64_t s = static_cast<uint64_t>(seed) * 0x100000001B3ULL ^ static_cast<uint64_t>(seed2);
    if (seed == 0 && seed2 == 0) s = std::random_device()() * 0x100000001ULL ^ std::random_device()();
    return DatasetPtr(std::make_shared<ShuffleDataset>(std::move(input), buffer, s, reshuffle_));
  }

 private:
  bool reshuffle_ = true;
};

// ---- zip / concatenate ----------------------------------------------------------

std::vector<DataType> ConcatTypes(const std::vector<DatasetPtr>& ds) {
  std::vector<DataType> out;
  for (const DatasetPtr& d : ds) out.insert(out.end(), d->dtypes().begin(), d->dtypes().end());
  return out;
}

class ZipDataset : public Dataset {
 public:
  explicit ZipDataset(std::vector<DatasetPtr> inputs) : Dataset(ConcatTypes(inputs)), inputs_(std::move(inputs)) {}
  absl::StatusOr<std::unique_ptr<DatasetIterator>> MakeIterator() const override {
    std::vector<std::shared_ptr<DatasetIterator>> its;
    for (const DatasetPtr& d : inputs_) {
      DF_ASSIGN_OR_RETURN(std::shared_ptr<DatasetIterator> it, d->MakeIterator());
      its.push_back(std::move(it));
    }
    return MakeFn([self = Self<ZipDataset>(), its](Element* out, bool* end) -> absl::Status {
      Element all;
      for (const auto& it : its) {
        Element e;
        RETURN_IF_ERROR(it->GetNext(&e, end));
        if (*end) return absl::OkStatus();
        all.insert(all.end(), e.begin(), e.end());
      }
      *out = std::move(all);
      return absl::OkStatus();
    });
  }
  std::string DebugName() const override { return "ZipDataset"; }

 private:
  const std::vector<DatasetPtr> inputs_;
};

class ConcatenateDataset : public Dataset {
 public:
  ConcatenateDataset(DatasetPtr a, DatasetPtr b) : Dataset(a->dtypes()), a_(std::move(a)), b_(std::move(b)) {}
  absl::StatusOr<std::unique_ptr<DatasetIterator>> MakeIterator() const override {
    DF_ASSIGN_OR_RETURN(std::shared_ptr<DatasetIterator> in, a_->MakeIterator());
    return MakeFn(
        [self = Self<ConcatenateDataset>(), in, second = false](Element* out, bool* end) mutable -> absl::Status {
          RETURN_IF_ERROR(in->GetNext(out, end));
          if (!*end || second) return absl::OkStatus();
          second = true;
          DF_ASSIGN_OR_RETURN(std::unique_ptr<DatasetIterator> next, self->b_->MakeIterator());
          in = std::move(next);
          return in->GetNext(out, end);
        });
  }
  std::string DebugName() const override { return "ConcatenateDataset"; }

 private:
  const DatasetPtr a_, b_;
};

class ZipOp : public DatasetOpKernel {
 public:
  using DatasetOpKernel::DatasetOpKernel;

 protected:
  absl::StatusOr<DatasetPtr> MakeDataset(OpKernelContext* ctx) override {
    std::vector<DatasetPtr> inputs;
    for (int i = 0; i < ctx->num_inputs(); ++i) {
      DF_ASSIGN_OR_RETURN(DatasetPtr d, InputDataset(ctx, i));
      inputs.push_back(std::move(d));
    }
    if (type_string() == "ConcatenateDataset") {
      if (inputs[0]->dtypes() != inputs[1]->dtypes()) {
        return absl::InvalidArgumentError(absl::StrCat("Cannot concatenate ", inputs[0]->DebugName(), " and ",
                                                       inputs[1]->DebugName(), ": their components' dtypes differ"));
      }
      return DatasetPtr(std::make_shared<ConcatenateDataset>(inputs[0], inputs[1]));
    }
    return DatasetPtr(std::make_shared<ZipDataset>(std::move(inputs)));
  }
};

template <CountKind K>
std::unique_ptr<OpKernel> MakeCountOp(OpKernelConstruction* c) {
  return std::make_unique<CountOp>(c, K);
}

}  // namespace

void RegisterTransformDatasetKernels(KernelRegistry* r) {
  r->Register<BatchOp>("BatchDataset", kCpu, DT_INVALID);
  r->Register<BatchOp>("PaddedBatchDataset", kCpu, DT_INVALID);
  r->Register("RepeatDataset", kCpu, DT_INVALID, MakeCountOp<CountKind::kRepeat>);
  r->Register("TakeDataset", kCpu, DT_INVALID, MakeCountOp<CountKind::kTake>);
  r->Register("SkipDataset", kCpu, DT_INVALID, MakeCountOp<CountKind::kSkip>);
  r->Register<ShardOp>("ShardDataset", kCpu, DT_INVALID);
  r->Register<ShuffleOp>("ShuffleDataset", kCpu, DT_INVALID);
  r->Register<ZipOp>("ZipDataset", kCpu, DT_INVALID);
  r->Register<ZipOp>("ConcatenateDataset", kCpu, DT_INVALID);
}

}  // namespace data
}  // namespace distflow
