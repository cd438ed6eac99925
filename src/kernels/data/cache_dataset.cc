// Dataset.cache: in memory (the first pass to read the input to its end
// fills the cache; later passes read it), or, with a filename, in a TFRecord
// file that later passes of this process or another one read instead of the
// input.
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/env.h"
#include "base/status_macros.h"
#include "data/record_io.h"
#include "kernels/data/dataset.h"
#include "kernels/data/dataset_kernels.h"
#include "kernels/kernel_registry.h"
#include "proto/tensor.pb.h"
#include "tensor/tensor_codec.h"

namespace distflow {
namespace data {
namespace {

class CacheDataset : public Dataset {
 public:
  explicit CacheDataset(DatasetPtr input) : Dataset(input->dtypes()), input_(std::move(input)) {}

  absl::StatusOr<std::unique_ptr<DatasetIterator>> MakeIterator() const override {
    auto self = Self<CacheDataset>();
    {
      absl::MutexLock lock(&mu_);
      if (complete_) {
        return MakeFn([self, i = size_t{0}](Element* out, bool* end) mutable {
          *end = i >= self->cache_.size();  // complete_: cache_ no longer changes
          if (!*end) *out = self->cache_[i++];
          return absl::OkStatus();
        });
      }
    }
    // Reads the input, keeping what it reads; the first pass to finish fills the cache.
    DF_ASSIGN_OR_RETURN(std::shared_ptr<DatasetIterator> in, input_->MakeIterator());
    auto kept = std::make_shared<std::vector<Element>>();
    return MakeFn([self, in, kept](Element* out, bool* end) -> absl::Status {
      RETURN_IF_ERROR(in->GetNext(out, end));
      if (!*end) {
        kept->push_back(*out);
        return absl::OkStatus();
      }
      absl::MutexLock lock(&self->mu_);
      if (!self->complete_) {
        self->cache_ = std::move(*kept);
        self->complete_ = true;
      }
      return absl::OkStatus();
    });
  }
  std::string DebugName() const override { return absl::StrCat("CacheDataset(", input_->DebugName(), ")"); }

 private:
  const DatasetPtr input_;
  mutable absl::Mutex mu_;
  mutable bool complete_ ABSL_GUARDED_BY(mu_) = false;
  mutable std::vector<Element> cache_;  // written once under mu_ before complete_, then read-only
};

// Dataset.cache(filename): the first pass that reads the input to its end
// writes its elements to `filename` (a TFRecord file: a header naming the
// components' dtypes, then one TensorProto record per component of each
// element), through a temporary file renamed over `filename` at the end,
// so a pass cut short leaves nothing behind. Every later pass, in this
// process or another one, reads the file instead of the input.
class FileCacheDataset : public Dataset {
 public:
  FileCacheDataset(DatasetPtr input, std::string filename)
      : Dataset(input->dtypes()), input_(std::move(input)), filename_(std::move(filename)) {}

  absl::StatusOr<std::unique_ptr<DatasetIterator>> MakeIterator() const override {
    if (Env::Default()->FileExists(filename_)) return ReadIterator();
    return WriteIterator();
  }
  std::string DebugName() const override {
    return absl::StrCat("CacheDataset(", input_->DebugName(), ", \"", filename_, "\")");
  }

 private:
  std::string Header() const {
    std::string h = "distflow dataset cache 1:";
    for (DataType t : dtypes()) absl::StrAppend(&h, " ", DataTypeName(t));
    return h;
  }

  absl::StatusOr<std::unique_ptr<DatasetIterator>> ReadIterator() const {
    DF_ASSIGN_OR_RETURN(std::shared_ptr<record_io::RecordReader> reader, record_io::RecordReader::Open(filename_));
    std::string header;
    if (absl::Status s = reader->ReadRecord(&header); !s.ok() || header != Header()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "Dataset.cache: ", filename_, " is not this dataset's cache (",
          s.ok()
              ? absl::StrCat("it holds \"", header.substr(0, 80), "\", this dataset's elements are \"", Header(), "\"")
              : s.ToString(),
          "); delete it, or pass another filename"));
    }
    const size_t n = dtypes().size();
    return MakeFn([reader, n, path = filename_](Element* out, bool* end) -> absl::Status {
      out->clear();
      std::string record;
      for (size_t i = 0; i < n; ++i) {
        absl::Status s = reader->ReadRecord(&record);
        if (absl::IsOutOfRange(s) && i == 0) {
          *end = true;
          return absl::OkStatus();
        }
        if (absl::IsOutOfRange(s)) {
          return absl::DataLossError(absl::StrCat("Dataset.cache: ", path, " ends inside an element; delete it"));
        }
        RETURN_IF_ERROR(s);
        proto::TensorProto p;
        if (!p.ParseFromString(record)) {
          return absl::DataLossError(absl::StrCat("Dataset.cache: a damaged tensor in ", path, " at offset ",
                                                  reader->offset(), "; delete it"));
        }
        DF_ASSIGN_OR_RETURN(Tensor t, DecodeTensor(p));
        out->push_back(std::move(t));
      }
      *end = false;
      return absl::OkStatus();
    });
  }

  // Writes beside the file, then renames; the destructor removes an
  // unfinished temporary file.
  class Writer : public DatasetIterator {
   public:
    Writer(std::unique_ptr<DatasetIterator> in, std::unique_ptr<record_io::RecordWriter> out, std::string tmp,
           std::string path)
        : in_(std::move(in)), out_(std::move(out)), tmp_(std::move(tmp)), path_(std::move(path)) {}
    ~Writer() override {
      if (out_ != nullptr) {
        out_.reset();
        std::remove(tmp_.c_str());
      }
    }
    absl::Status GetNext(Element* out, bool* end) override {
      RETURN_IF_ERROR(in_->GetNext(out, end));
      if (out_ == nullptr) return absl::OkStatus();  // finished (or failed) writing: pass through
      if (!*end) {
        for (const Tensor& t : *out) {
          proto::TensorProto p;
          EncodeTensor(t, &p);
          RETURN_IF_ERROR(out_->Write(p.SerializeAsString()));
        }
        return absl::OkStatus();
      }
      absl::Status s = out_->Close();
      out_.reset();
      if (s.ok() && std::rename(tmp_.c_str(), path_.c_str()) != 0) {
        s = absl::InternalError(
            absl::StrCat("Dataset.cache: could not rename ", tmp_, " to ", path_, ": ", std::strerror(errno)));
      }
      if (!s.ok()) std::remove(tmp_.c_str());
      return s;
    }

   private:
    const std::unique_ptr<DatasetIterator> in_;
    std::unique_ptr<record_io::RecordWriter> out_;
    const std::string tmp_, path_;
  };

  absl::StatusOr<std::unique_ptr<DatasetIterator>> WriteIterator() const {
    static std::atomic<int64_t> next{0};
    const std::string tmp = absl::StrCat(filename_, ".tmp-", getpid(), "-", next++);
    DF_ASSIGN_OR_RETURN(std::unique_ptr<DatasetIterator> in, input_->MakeIterator());
    absl::StatusOr<std::unique_ptr<record_io::RecordWriter>> out = record_io::RecordWriter::Open(tmp);
    if (!out.ok()) {
      return absl::Status(out.status().code(), absl::StrCat("Dataset.cache: cannot write the cache file beside ",
                                                            filename_, ": ", out.status().message()));
    }
    RETURN_IF_ERROR((*out)->Write(Header()));
    return std::unique_ptr<DatasetIterator>(new Writer(std::move(in), std::move(*out), tmp, filename_));
  }

  const DatasetPtr input_;
  const std::string filename_;
};

class CacheOp : public DatasetOpKernel {
 public:
  using DatasetOpKernel::DatasetOpKernel;

 protected:
  absl::StatusOr<DatasetPtr> MakeDataset(OpKernelContext* ctx) override {
    DF_ASSIGN_OR_RETURN(DatasetPtr input, InputDataset(ctx, 0));
    const Tensor& f = ctx->input(1);
    if (f.dtype() != DT_STRING || f.NumElements() != 1) {
      return absl::InvalidArgumentError("Dataset.cache: filename must be one string");
    }
    const std::string& filename = f.flat<std::string>()[0];
    if (filename.empty()) return DatasetPtr(std::make_shared<CacheDataset>(std::move(input)));
    return DatasetPtr(std::make_shared<FileCacheDataset>(std::move(input), filename));
  }
};
}  // namespace

void RegisterCacheDatasetKernels(KernelRegistry* r) { r->Register<CacheOp>("CacheDataset", kCpu, DT_INVALID); }

}  // namespace data
}  // namespace distflow
