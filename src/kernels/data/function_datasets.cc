// Datasets that run a graph function per element (kernels/function.h):
// MapDataset (the function's results are the new element; with
// num_parallel_calls > 1, a pool of that many threads maps the next
// elements ahead while keeping their order) and FilterDataset (keeps the
// elements for which the function gives true). The function is
// instantiated once, when the dataset is made, on the task that makes it.
#include <deque>
#include <future>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "base/thread_pool.h"
#include "graph/attr_value.h"
#include "kernels/data/dataset.h"
#include "kernels/data/dataset_kernels.h"
#include "kernels/device.h"
#include "kernels/function.h"
#include "kernels/kernel_registry.h"

namespace distflow {
namespace data {
namespace {

std::vector<DataType> RetTypes(const proto::FunctionDef& def) {
  std::vector<DataType> out;
  for (int t : def.ret_type()) out.push_back(static_cast<DataType>(t));
  return out;
}

absl::Status CheckArgs(const proto::FunctionDef& def, const std::vector<DataType>& element, const char* what) {
  std::vector<DataType> args;
  for (int t : def.arg_type()) args.push_back(static_cast<DataType>(t));
  if (args != element) {
    std::string a, e;
    for (DataType t : args) absl::StrAppend(&a, a.empty() ? "" : ", ", DataTypeName(t));
    for (DataType t : element) absl::StrAppend(&e, e.empty() ? "" : ", ", DataTypeName(t));
    return absl::InvalidArgumentError(
        absl::StrCat(what, " function '", def.name(), "' takes (", a, ") but the dataset's elements are (", e, ")"));
  }
  return absl::OkStatus();
}

class MapDataset : public Dataset {
 public:
  MapDataset(DatasetPtr input, std::shared_ptr<const FunctionInstance> fn, int parallel)
      : Dataset(RetTypes(fn->def())), input_(std::move(input)), fn_(std::move(fn)), parallel_(parallel) {}

  absl::StatusOr<std::unique_ptr<DatasetIterator>> MakeIterator() const override {
    DF_ASSIGN_OR_RETURN(std::unique_ptr<DatasetIterator> in, input_->MakeIterator());
    return std::unique_ptr<DatasetIterator>(new Iter(Self<MapDataset>(), std::move(in)));
  }
  std::string DebugName() const override { return absl::StrCat("MapDataset(", input_->DebugName(), ")"); }

 private:
  // Not thread-safe (one consumer); the pool only runs the function.
  class Iter : public DatasetIterator {
   public:
    Iter(std::shared_ptr<const MapDataset> d, std::unique_ptr<DatasetIterator> in)
        : d_(std::move(d)), in_(std::move(in)) {
      if (d_->parallel_ > 1) pool_ = std::make_unique<ThreadPool>("df_map", d_->parallel_);
    }
    ~Iter() override {
      for (auto& f : pending_) f.wait();  // before the pool and the input go
    }
    absl::Status GetNext(Element* out, bool* end) override {
      if (pool_ == nullptr) {
        Element e;
        RETURN_IF_ERROR(in_->GetNext(&e, end));
        if (*end) return absl::OkStatus();
        DF_ASSIGN_OR_RETURN(*out, d_->fn_->Run(e, nullptr));
        return absl::OkStatus();
      }
      // Keep `parallel` calls in flight; answer in input order.
      while (!input_end_ && static_cast<int>(pending_.size()) < d_->parallel_) {
        Element e;
        RETURN_IF_ERROR(in_->GetNext(&e, &input_end_));
        if (input_end_) break;
        auto task = std::make_shared<std::packaged_task<absl::StatusOr<Element>()>>(
            [fn = d_->fn_, e = std::move(e)] { return fn->Run(e, nullptr); });
        pending_.push_back(task->get_future());
        pool_->Schedule([task] { (*task)(); });
      }
      *end = pending_.empty();
      if (*end) return absl::OkStatus();
      absl::StatusOr<Element> r = pending_.front().get();
      pending_.pop_front();
      RETURN_IF_ERROR(r.status());
      *out = std::move(*r);
      return absl::OkStatus();
    }

   private:
    const std::shared_ptr<const MapDataset> d_;
    const std::unique_ptr<DatasetIterator> in_;
    std::unique_ptr<ThreadPool> pool_;
    std::deque<std::future<absl::StatusOr<Element>>> pending_;
    bool input_end_ = false;
  };

  const DatasetPtr input_;
  const std::shared_ptr<const FunctionInstance> fn_;
  const int parallel_;
};

class FilterDataset : public Dataset {
 public:
  FilterDataset(DatasetPtr input, std::shared_ptr<const FunctionInstance> fn)
      : Dataset(input->dtypes()), input_(std::move(input)), fn_(std::move(fn)) {}
  absl::StatusOr<std::unique_ptr<DatasetIterator>> MakeIterator() const override {
    DF_ASSIGN_OR_RETURN(std::unique_ptr<DatasetIterator> in, input_->MakeIterator());
    return std::unique_ptr<DatasetIterator>(new Iter(Self<FilterDataset>(), std::move(in)));
  }
  std::string DebugName() const override { return absl::StrCat("FilterDataset(", input_->DebugName(), ")"); }

 private:
  class Iter : public DatasetIterator {
   public:
    Iter(std::shared_ptr<const FilterDataset> d, std::unique_ptr<DatasetIterator> in)
        : d_(std::move(d)), in_(std::move(in)) {}
    absl::Status GetNext(Element* out, bool* end) override {
      while (true) {
        RETURN_IF_ERROR(in_->GetNext(out, end));
        if (*end) return absl::OkStatus();
        DF_ASSIGN_OR_RETURN(std::vector<Tensor> keep, d_->fn_->Run(*out, nullptr));
        if (keep.size() != 1 || keep[0].dtype() != DT_BOOL || keep[0].NumElements() != 1) {
          return absl::InvalidArgumentError(
              absl::StrCat("The filter predicate '", d_->fn_->def().name(), "' must give one bool scalar"));
        }
        if (keep[0].flat<bool>()[0]) return absl::OkStatus();
      }
    }

   private:
    const std::shared_ptr<const FilterDataset> d_;
    const std::unique_ptr<DatasetIterator> in_;
  };

  const DatasetPtr input_;
  const std::shared_ptr<const FunctionInstance> fn_;
};

// The dataset `fn` makes of `element` (it gives the key of a dataset its
// body made in `store`), checked against the components `want`; `what`
// names the transformation in errors.
absl::StatusOr<DatasetPtr> InnerDataset(const FunctionInstance& fn, DatasetStore& store, const Element& element,
                                        const std::vector<DataType>& want, const char* what) {
  DF_ASSIGN_OR_RETURN(std::vector<Tensor> key, fn.Run(element, nullptr));
  if (key.size() != 1 || key[0].dtype() != DT_STRING || key[0].NumElements() != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("The ", what, " function '", fn.def().name(), "' must give one dataset"));
  }
  DF_ASSIGN_OR_RETURN(DatasetPtr inner, store.Get(key[0].flat<std::string>()[0]));
  if (inner->dtypes() != want) {
    return absl::InvalidArgumentError(absl::StrCat("The ", what, " function '", fn.def().name(), "' gave ",
                                                   inner->DebugName(),
                                                   " whose components differ from the declared ones"));
  }
  return inner;
}

// Runs the function on each input element; the function gives the key of
// a dataset its body made (in the same DatasetStore), which is read to its
// end before the next element. Elements are mapped one at a time: the
// body's dataset ops reuse their keys on every call.
class FlatMapDataset : public Dataset {
 public:
  FlatMapDataset(DatasetPtr input, std::shared_ptr<const FunctionInstance> fn, std::shared_ptr<DatasetStore> store,
                 std::vector<DataType> types)
      : Dataset(std::move(types)), input_(std::move(input)), fn_(std::move(fn)), store_(std::move(store)) {}
  absl::StatusOr<std::unique_ptr<DatasetIterator>> MakeIterator() const override {
    DF_ASSIGN_OR_RETURN(std::unique_ptr<DatasetIterator> in, input_->MakeIterator());
    return std::unique_ptr<DatasetIterator>(new Iter(Self<FlatMapDataset>(), std::move(in)));
  }
  std::string DebugName() const override { return absl::StrCat("FlatMapDataset(", input_->DebugName(), ")"); }

 private:
  class Iter : public DatasetIterator {
   public:
    Iter(std::shared_ptr<const FlatMapDataset> d, std::unique_ptr<DatasetIterator> in)
        : d_(std::move(d)), in_(std::move(in)) {}
    absl::Status GetNext(Element* out, bool* end) override {
      while (true) {
        if (inner_ != nullptr) {
          RETURN_IF_ERROR(inner_->GetNext(out, end));
          if (!*end) return absl::OkStatus();
          inner_.reset();
        }
        Element e;
        RETURN_IF_ERROR(in_->GetNext(&e, end));
        if (*end) return absl::OkStatus();
        DF_ASSIGN_OR_RETURN(DatasetPtr inner, InnerDataset(*d_->fn_, *d_->store_, e, d_->dtypes(), "flat_map"));
        DF_ASSIGN_OR_RETURN(inner_, inner->MakeIterator());
      }
    }

   private:
    const std::shared_ptr<const FlatMapDataset> d_;
    const std::unique_ptr<DatasetIterator> in_;
    std::unique_ptr<DatasetIterator> inner_;
  };

  const DatasetPtr input_;
  const std::shared_ptr<const FunctionInstance> fn_;
  const std::shared_ptr<DatasetStore> store_;
};

// Dataset.interleave: the function makes a dataset of each input element,
// as for flat_map, but `cycle_length` of them are read at once, taking
// `block_length` elements from each in turn. TensorFlow's order: an
// exhausted slot is left empty until the cycle comes back to it, and is
// then filled with the next input element's dataset.
class InterleaveDataset : public Dataset {
 public:
  InterleaveDataset(DatasetPtr input, std::shared_ptr<const FunctionInstance> fn, std::shared_ptr<DatasetStore> store,
                    std::vector<DataType> types, int64_t cycle_length, int64_t block_length)
      : Dataset(std::move(types)),
        input_(std::move(input)),
        fn_(std::move(fn)),
        store_(std::move(store)),
        cycle_length_(cycle_length),
        block_length_(block_length) {}
  absl::StatusOr<std::unique_ptr<DatasetIterator>> MakeIterator() const override {
    DF_ASSIGN_OR_RETURN(std::unique_ptr<DatasetIterator> in, input_->MakeIterator());
    return std::unique_ptr<DatasetIterator>(new Iter(Self<InterleaveDataset>(), std::move(in)));
  }
  std::string DebugName() const override { return absl::StrCat("InterleaveDataset(", input_->DebugName(), ")"); }

 private:
  class Iter : public DatasetIterator {
   public:
    Iter(std::shared_ptr<const InterleaveDataset> d, std::unique_ptr<DatasetIterator> in)
        : d_(std::move(d)), in_(std::move(in)), slots_(static_cast<size_t>(d_->cycle_length_)) {}
    absl::Status GetNext(Element* out, bool* end) override {
      while (!input_end_ || open_ > 0) {
        std::unique_ptr<DatasetIterator>& slot = slots_[cycle_index_];
        if (slot != nullptr) {
          bool slot_end = false;
          RETURN_IF_ERROR(slot->GetNext(out, &slot_end));
          if (!slot_end) {
            if (++block_index_ == d_->block_length_) Advance();
            *end = false;
            return absl::OkStatus();
          }
          slot.reset();
          --open_;
          Advance();
        } else if (!input_end_) {
          Element e;
          RETURN_IF_ERROR(in_->GetNext(&e, &input_end_));
          if (input_end_) continue;
          DF_ASSIGN_OR_RETURN(slot, Open(e));
          ++open_;
        } else {
          Advance();
        }
      }
      *end = true;
      return absl::OkStatus();
    }

   private:
    void Advance() {
      block_index_ = 0;
      cycle_index_ = (cycle_index_ + 1) % slots_.size();
    }
    absl::StatusOr<std::unique_ptr<DatasetIterator>> Open(const Element& e) {
      DF_ASSIGN_OR_RETURN(DatasetPtr inner, InnerDataset(*d_->fn_, *d_->store_, e, d_->dtypes(), "interleave"));
      return inner->MakeIterator();
    }

    const std::shared_ptr<const InterleaveDataset> d_;
    const std::unique_ptr<DatasetIterator> in_;
    std::vector<std::unique_ptr<DatasetIterator>> slots_;
    size_t cycle_index_ = 0;
    int64_t block_index_ = 0;
    int64_t open_ = 0;
    bool input_end_ = false;
  };

  const DatasetPtr input_;
  const std::shared_ptr<const FunctionInstance> fn_;
  const std::shared_ptr<DatasetStore> store_;
  const int64_t cycle_length_;
  const int64_t block_length_;
};

class FunctionDatasetOp : public DatasetOpKernel {
 public:
  using DatasetOpKernel::DatasetOpKernel;
  absl::Status Init(OpKernelConstruction* c) override {
    DF_ASSIGN_OR_RETURN(f_, GetAttrString(c->def(), "f"));
    if (absl::StatusOr<std::vector<DataType>> t = GetAttrTypeList(c->def(), "output_types"); t.ok()) types_ = *t;
    return absl::OkStatus();
  }

 protected:
  absl::StatusOr<DatasetPtr> MakeDataset(OpKernelContext* ctx) override {
    DF_ASSIGN_OR_RETURN(DatasetPtr input, InputDataset(ctx, 0));
    DF_ASSIGN_OR_RETURN(std::shared_ptr<const FunctionInstance> fn,
                        InstantiateFunction(f_, ctx->device(), ctx->default_container()));
    if (type_string() == "FlatMapDataset") {
      RETURN_IF_ERROR(CheckArgs(fn->def(), input->dtypes(), "The flat_map"));
      DF_ASSIGN_OR_RETURN(std::shared_ptr<DatasetStore> store, DatasetStoreOf(ctx));
      return DatasetPtr(std::make_shared<FlatMapDataset>(std::move(input), std::move(fn), std::move(store), types_));
    }
    if (type_string() == "InterleaveDataset") {
      RETURN_IF_ERROR(CheckArgs(fn->def(), input->dtypes(), "The interleave"));
      DF_ASSIGN_OR_RETURN(int64_t cycle, ScalarInputInt(ctx, 1, "cycle_length"));
      DF_ASSIGN_OR_RETURN(int64_t block, ScalarInputInt(ctx, 2, "block_length"));
      if (cycle < 1 || cycle > 4096) {
        return absl::InvalidArgumentError(absl::StrCat("interleave: cycle_length must be 1..4096, got ", cycle));
      }
      if (block < 1)
        return absl::InvalidArgumentError(absl::StrCat("interleave: block_length must be >= 1, got ", block));
      DF_ASSIGN_OR_RETURN(std::shared_ptr<DatasetStore> store, DatasetStoreOf(ctx));
      return DatasetPtr(
          std::make_shared<InterleaveDataset>(std::move(input), std::move(fn), std::move(store), types_, cycle, block));
    }
    const bool map = type_string() == "MapDataset";
    RETURN_IF_ERROR(CheckArgs(fn->def(), input->dtypes(), map ? "The map" : "The filter"));
    if (!map) return DatasetPtr(std::make_shared<FilterDataset>(std::move(input), std::move(fn)));
    DF_ASSIGN_OR_RETURN(int64_t parallel, ScalarInputInt(ctx, 1, "num_parallel_calls"));
    if (parallel == -1) parallel = 2;  // AUTOTUNE
    if (parallel < 1 || parallel > 64) {
      return absl::InvalidArgumentError(absl::StrCat("'num_parallel_calls' must be 1..64 or -1, got ", parallel));
    }
    return DatasetPtr(std::make_shared<MapDataset>(std::move(input), std::move(fn), static_cast<int>(parallel)));
  }

 private:
  std::string f_;
  std::vector<DataType> types_;  // FlatMapDataset's and InterleaveDataset's
};

}  // namespace

void RegisterFunctionDatasetKernels(KernelRegistry* r) {
  r->Register<FunctionDatasetOp>("MapDataset", kCpu, DT_INVALID);
  r->Register<FunctionDatasetOp>("FilterDataset", kCpu, DT_INVALID);
  r->Register<FunctionDatasetOp>("FlatMapDataset", kCpu, DT_INVALID);
  r->Register<FunctionDatasetOp>("InterleaveDataset", kCpu, DT_INVALID);
}

}  // namespace data
}  // namespace distflow
