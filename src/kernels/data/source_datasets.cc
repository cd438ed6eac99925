// The datasets that read their elements from somewhere: tensors given to the
// op (TensorDataset, TensorSliceDataset), a range of integers, and files
// (TextLineDataset, FixedLengthRecordDataset, read through the Env).
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/env.h"
#include "base/status_macros.h"
#include "data/record_io.h"
#include "kernels/data/dataset.h"
#include "kernels/data/dataset_kernels.h"
#include "kernels/kernel_registry.h"

namespace distflow {
namespace data {
namespace {

std::vector<DataType> TypesOf(const std::vector<Tensor>& ts) {
  std::vector<DataType> out;
  for (const Tensor& t : ts) out.push_back(t.dtype());
  return out;
}

// Yields elements [0, n) of a function of the index.
class IndexedIterator : public DatasetIterator {
 public:
  IndexedIterator(int64_t n, std::function<absl::Status(int64_t, Element*)> at) : n_(n), at_(std::move(at)) {}
  absl::Status GetNext(Element* out, bool* end) override {
    *end = next_ >= n_;
    if (*end) return absl::OkStatus();
    return at_(next_++, out);
  }

 private:
  const int64_t n_;
  const std::function<absl::Status(int64_t, Element*)> at_;
  int64_t next_ = 0;
};

class TensorsDataset : public Dataset {
 public:
  TensorsDataset(std::vector<Tensor> components, bool slices)
      : Dataset(TypesOf(components)), components_(std::move(components)), slices_(slices) {}

  absl::StatusOr<std::unique_ptr<DatasetIterator>> MakeIterator() const override {
    const int64_t n = slices_ ? (components_.empty() ? 0 : components_[0].dim_size(0)) : 1;
    return std::unique_ptr<DatasetIterator>(
        new IndexedIterator(n, [self = Self<TensorsDataset>()](int64_t i, Element* out) {
          out->clear();
          for (const Tensor& c : self->components_) {
            if (!self->slices_) {
              out->push_back(c);
              continue;
            }
            TensorShape row_shape = c.shape();
            row_shape.RemoveDim(0);
            DF_ASSIGN_OR_RETURN(Tensor row, c.Slice(i, i + 1).Reshaped(row_shape));
            out->push_back(std::move(row));
          }
          return absl::OkStatus();
        }));
  }
  std::string DebugName() const override { return slices_ ? "TensorSliceDataset" : "TensorDataset"; }

 private:
  const std::vector<Tensor> components_;
  const bool slices_;
};

class TensorsOp : public DatasetOpKernel {
 public:
  TensorsOp(OpKernelConstruction* c, bool slices) : DatasetOpKernel(c), slices_(slices) {}

 protected:
  absl::StatusOr<DatasetPtr> MakeDataset(OpKernelContext* ctx) override {
    std::vector<Tensor> components;
    for (int i = 0; i < ctx->num_inputs(); ++i) {
      const Tensor& t = ctx->input(i);
      if (slices_) {
        if (t.shape().dims() == 0) {
          return absl::InvalidArgumentError(absl::StrCat("Component ", i, " is a scalar: it has no rows to slice"));
        }
        if (i > 0 && t.dim_size(0) != components[0].dim_size(0)) {
          return absl::InvalidArgumentError(
              absl::StrCat("Components have different numbers of rows: component 0 has ", components[0].dim_size(0),
                           " (shape ", components[0].shape().DebugString(), "), component ", i, " has ", t.dim_size(0),
                           " (shape ", t.shape().DebugString(), ")"));
        }
      }
      components.push_back(Keep(t));
    }
    return DatasetPtr(std::make_shared<TensorsDataset>(std::move(components), slices_));
  }

 private:
  const bool slices_;
};

class RangeDataset : public Dataset {
 public:
  RangeDataset(int64_t start, int64_t stop, int64_t step)
      : Dataset({DT_INT64}), start_(start), stop_(stop), step_(step) {}
  absl::StatusOr<std::unique_ptr<DatasetIterator>> MakeIterator() const override {
    int64_t n = 0;
    if (step_ > 0 && stop_ > start_) n = (stop_ - start_ + step_ - 1) / step_;
    if (step_ < 0 && stop_ < start_) n = (start_ - stop_ - step_ - 1) / -step_;
    return std::unique_ptr<DatasetIterator>(
        new IndexedIterator(n, [start = start_, step = step_](int64_t i, Element* out) {
          *out = {Tensor::Scalar<int64_t>(start + i * step)};
          return absl::OkStatus();
        }));
  }
  std::string DebugName() const override { return "RangeDataset"; }

 private:
  const int64_t start_, stop_, step_;
};

class RangeOp : public DatasetOpKernel {
 public:
  using DatasetOpKernel::DatasetOpKernel;

 protected:
  absl::StatusOr<DatasetPtr> MakeDataset(OpKernelContext* ctx) override {
    DF_ASSIGN_OR_RETURN(int64_t start, ScalarInputInt(ctx, 0, "start"));
    DF_ASSIGN_OR_RETURN(int64_t stop, ScalarInputInt(ctx, 1, "stop"));
    DF_ASSIGN_OR_RETURN(int64_t step, ScalarInputInt(ctx, 2, "step"));
    if (step == 0) return absl::InvalidArgumentError("'step' must not be 0");
    return DatasetPtr(std::make_shared<RangeDataset>(start, stop, step));
  }
};

// Records cut from whole files, one file at a time (files are read when the
// pass reaches them).
class FileRecordsDataset : public Dataset {
 public:
  using Splitter =
      std::function<absl::Status(const std::string& file, const std::string& data, std::vector<std::string>* records)>;
  FileRecordsDataset(std::string name, std::vector<std::string> files, Splitter split)
      : Dataset({DT_STRING}), name_(std::move(name)), files_(std::move(files)), split_(std::move(split)) {}

  absl::StatusOr<std::unique_ptr<DatasetIterator>> MakeIterator() const override {
    return std::unique_ptr<DatasetIterator>(new Iter(Self<FileRecordsDataset>()));
  }
  std::string DebugName() const override { return name_; }

 private:
  class Iter : public DatasetIterator {
   public:
    explicit Iter(std::shared_ptr<const FileRecordsDataset> d) : d_(std::move(d)) {}
    absl::Status GetNext(Element* out, bool* end) override {
      while (next_record_ >= records_.size()) {
        if (next_file_ >= d_->files_.size()) {
          *end = true;
          return absl::OkStatus();
        }
        const std::string& file = d_->files_[next_file_++];
        absl::StatusOr<std::string> data = Env::Default()->ReadFile(file);
        if (!data.ok())
          return absl::Status(data.status().code(),
                              absl::StrCat(d_->name_, " cannot read '", file, "': ", data.status().message()));
        records_.clear();
        next_record_ = 0;
        RETURN_IF_ERROR(d_->split_(file, *data, &records_));
      }
      *end = false;
      *out = {Tensor::Scalar<std::string>(std::move(records_[next_record_++]))};
      return absl::OkStatus();
    }

   private:
    const std::shared_ptr<const FileRecordsDataset> d_;
    size_t next_file_ = 0;
    std::vector<std::string> records_;
    size_t next_record_ = 0;
  };

  const std::string name_;
  const std::vector<std::string> files_;
  const Splitter split_;
};

absl::StatusOr<std::vector<std::string>> FileNames(OpKernelContext* ctx) {
  const Tensor& t = ctx->input(0);
  if (t.shape().dims() > 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("'filenames' must be a scalar or a vector, got shape ", t.shape().DebugString()));
  }
  auto f = t.flat<std::string>();
  return std::vector<std::string>(f.begin(), f.end());
}

class TextLineOp : public DatasetOpKernel {
 public:
  using DatasetOpKernel::DatasetOpKernel;

 protected:
  absl::StatusOr<DatasetPtr> MakeDataset(OpKernelContext* ctx) override {
    DF_ASSIGN_OR_RETURN(std::vector<std::string> files, FileNames(ctx));
    return DatasetPtr(std::make_shared<FileRecordsDataset>(
        "TextLineDataset", std::move(files),
        [](const std::string&, const std::string& data, std::vector<std::string>* out) {
          size_t pos = 0;
          while (pos < data.size()) {
            size_t nl = data.find('\n', pos);
            if (nl == std::string::npos) nl = data.size();
            size_t stop = nl;
            if (stop > pos && data[stop - 1] == '\r') --stop;
            out->push_back(data.substr(pos, stop - pos));
            pos = nl + 1;
          }
          return absl::OkStatus();
        }));
  }
};

class FixedLengthOp : public DatasetOpKernel {
 public:
  using DatasetOpKernel::DatasetOpKernel;

 protected:
  absl::StatusOr<DatasetPtr> MakeDataset(OpKernelContext* ctx) override {
    DF_ASSIGN_OR_RETURN(std::vector<std::string> files, FileNames(ctx));
    DF_ASSIGN_OR_RETURN(int64_t header, ScalarInputInt(ctx, 1, "header_bytes"));
    DF_ASSIGN_OR_RETURN(int64_t record, ScalarInputInt(ctx, 2, "record_bytes"));
    DF_ASSIGN_OR_RETURN(int64_t footer, ScalarInputInt(ctx, 3, "footer_bytes"));
    if (header < 0 || footer < 0 || record <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("Need header_bytes >= 0, footer_bytes >= 0 and record_bytes > 0, got ", header, ", ", footer,
                       " and ", record));
    }
    const size_t h = static_cast<size_t>(header), r = static_cast<size_t>(record), f = static_cast<size_t>(footer);
    return DatasetPtr(std::make_shared<FileRecordsDataset>(
        "FixedLengthRecordDataset", std::move(files),
        [h, r, f](const std::string& file, const std::string& data, std::vector<std::string>* out) {
          if (data.size() < h + f || (data.size() - h - f) % r != 0) {
            return absl::DataLossError(absl::StrCat("FixedLengthRecordDataset: '", file, "' has ", data.size(),
                                                    " bytes, not a ", h, "-byte header and a ", f,
                                                    "-byte footer around whole records of ", r, " bytes"));
          }
          for (size_t pos = h; pos + r <= data.size() - f; pos += r) out->push_back(data.substr(pos, r));
          return absl::OkStatus();
        }));
  }
};

// Records of TFRecord files, read one at a time (a file is opened when the
// pass reaches it).
class TFRecordDataset : public Dataset {
 public:
  TFRecordDataset(std::vector<std::string> files, record_io::Compression compression)
      : Dataset({DT_STRING}), files_(std::move(files)), compression_(compression) {}
  absl::StatusOr<std::unique_ptr<DatasetIterator>> MakeIterator() const override {
    return MakeIter(Self<TFRecordDataset>());
  }
  std::string DebugName() const override { return "TFRecordDataset"; }

 private:
  static absl::StatusOr<std::unique_ptr<DatasetIterator>> MakeIter(std::shared_ptr<const TFRecordDataset> d);

  const std::vector<std::string> files_;
  const record_io::Compression compression_;
};

class TFRecordIterator : public DatasetIterator {
 public:
  TFRecordIterator(std::vector<std::string> files, record_io::Compression compression)
      : files_(std::move(files)), compression_(compression) {}
  absl::Status GetNext(Element* out, bool* end) override {
    while (true) {
      if (reader_ == nullptr) {
        if (next_file_ >= files_.size()) {
          *end = true;
          return absl::OkStatus();
        }
        DF_ASSIGN_OR_RETURN(reader_, record_io::RecordReader::Open(files_[next_file_++], compression_));
      }
      std::string record;
      absl::Status s = reader_->ReadRecord(&record);
      if (absl::IsOutOfRange(s)) {
        reader_.reset();
        continue;
      }
      RETURN_IF_ERROR(s);
      *end = false;
      *out = {Tensor::Scalar<std::string>(std::move(record))};
      return absl::OkStatus();
    }
  }

 private:
  const std::vector<std::string> files_;
  const record_io::Compression compression_;
  size_t next_file_ = 0;
  std::unique_ptr<record_io::RecordReader> reader_;
};

absl::StatusOr<std::unique_ptr<DatasetIterator>> TFRecordDataset::MakeIter(std::shared_ptr<const TFRecordDataset> d) {
  return std::unique_ptr<DatasetIterator>(new TFRecordIterator(d->files_, d->compression_));
}

class TFRecordOp : public DatasetOpKernel {
 public:
  using DatasetOpKernel::DatasetOpKernel;

 protected:
  absl::StatusOr<DatasetPtr> MakeDataset(OpKernelContext* ctx) override {
    DF_ASSIGN_OR_RETURN(std::vector<std::string> files, FileNames(ctx));
    const Tensor& c = ctx->input(1);
    if (c.NumElements() != 1) return absl::InvalidArgumentError("'compression_type' must be one string");
    DF_ASSIGN_OR_RETURN(record_io::Compression compression, record_io::ParseCompression(c.flat<std::string>()[0]));
    return DatasetPtr(std::make_shared<TFRecordDataset>(std::move(files), compression));
  }
};

}  // namespace

void RegisterSourceDatasetKernels(KernelRegistry* r) {
  r->Register("TensorDataset", kCpu, DT_INVALID, [](OpKernelConstruction* c) -> std::unique_ptr<OpKernel> {
    return std::make_unique<TensorsOp>(c, false);
  });
  r->Register("TensorSliceDataset", kCpu, DT_INVALID, [](OpKernelConstruction* c) -> std::unique_ptr<OpKernel> {
    return std::make_unique<TensorsOp>(c, true);
  });
  r->Register<RangeOp>("RangeDataset", kCpu, DT_INVALID);
  r->Register<TextLineOp>("TextLineDataset", kCpu, DT_INVALID);
  r->Register<FixedLengthOp>("FixedLengthRecordDataset", kCpu, DT_INVALID);
  r->Register<TFRecordOp>("TFRecordDataset", kCpu, DT_INVALID);
}

}  // namespace data
}  // namespace distflow
