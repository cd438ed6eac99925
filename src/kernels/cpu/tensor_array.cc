#include "kernels/cpu/tensor_array.h"

#include <cstring>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace distflow {

std::atomic<int64_t> TensorArray::bytes_copied_{0};

std::string StepContainer(int64_t step_id) { return absl::StrCat("__step_", step_id); }

namespace {

// The runs holding each (device's resource manager, step id) container.
struct StepHolders {
  absl::Mutex mu;
  absl::flat_hash_map<std::pair<ResourceMgr*, int64_t>, int> count ABSL_GUARDED_BY(mu);
};

StepHolders& Holders() {
  static auto* holders = new StepHolders;
  return *holders;
}

}  // namespace

void HoldStepContainer(ResourceMgr* rm, int64_t step_id) {
  StepHolders& h = Holders();
  absl::MutexLock lock(&h.mu);
  ++h.count[{rm, step_id}];
}

void ReleaseStepContainer(ResourceMgr* rm, int64_t step_id) {
  StepHolders& h = Holders();
  {
    absl::MutexLock lock(&h.mu);
    auto it = h.count.find({rm, step_id});
    if (it == h.count.end()) return;
    if (--it->second > 0) return;
    h.count.erase(it);
    // Dropped under the lock: a run of this id starting now must not create
    // its arrays in the container before it goes.
    rm->Cleanup(StepContainer(step_id));
  }
}

int StepContainerHoldersForTest(ResourceMgr* rm, int64_t step_id) {
  StepHolders& h = Holders();
  absl::MutexLock lock(&h.mu);
  auto it = h.count.find({rm, step_id});
  return it == h.count.end() ? 0 : it->second;
}

namespace {

// Copies `src`'s elements into `dst` starting at element `at`.
void CopyInto(const Tensor& src, Tensor* dst, int64_t at) {
  if (src.NumElements() == 0) return;
  if (src.dtype() == DT_STRING) {
    auto from = src.flat<std::string>();
    auto to = dst->flat<std::string>();
    for (size_t i = 0; i < from.size(); ++i) to[static_cast<size_t>(at) + i] = from[i];
  } else {
    std::memcpy(static_cast<char*>(dst->raw_data()) + static_cast<size_t>(at) * DataTypeSize(src.dtype()),
                src.raw_data(), src.TotalBytes());
  }
  TensorArray::CountCopy(static_cast<int64_t>(src.TotalBytes()));
}

absl::StatusOr<Tensor> Zeros(DataType dtype, const TensorShape& shape) {
  ASSIGN_OR_RETURN(Tensor t, Tensor::Allocate(dtype, shape));
  if (dtype != DT_STRING && t.NumElements() > 0) std::memset(t.raw_data(), 0, t.TotalBytes());
  return t;
}

template <typename T>
void AddInto(const Tensor& g, Tensor* sum) {
  auto a = g.flat<T>();
  auto s = sum->flat<T>();
  for (size_t i = 0; i < s.size(); ++i) s[i] += a[i];
}

}  // namespace

TensorArray::TensorArray(Options options) : options_(std::move(options)) {
  elements_.resize(static_cast<size_t>(options_.size));
}

absl::Status TensorArray::CheckIndex(int64_t index, const char* what, bool growing) const {
  if (index < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("TensorArray '", options_.name, "': cannot ", what, " index ", index, ": indices are >= 0"));
  }
  const int64_t size = static_cast<int64_t>(elements_.size());
  if (index >= size && !(growing && options_.dynamic_size)) {
    return absl::InvalidArgumentError(
        absl::StrCat("TensorArray '", options_.name, "' has size ", size, "; cannot ", what, " index ", index,
                     growing ? " (create it with dynamic_size=True to let it grow)" : ""));
  }
  return absl::OkStatus();
}

absl::Status TensorArray::Write(int64_t index, const Tensor& value, bool rewrite) {
  if (value.dtype() != options_.dtype) {
    return absl::InvalidArgumentError(absl::StrCat("TensorArray '", options_.name, "' holds ",
                                                   DataTypeName(options_.dtype), " but a write gives ",
                                                   DataTypeName(value.dtype())));
  }
  if (!options_.element_shape.IsCompatibleWith(value.shape())) {
    return absl::InvalidArgumentError(absl::StrCat("TensorArray '", options_.name, "' holds elements of shape ",
                                                   options_.element_shape.DebugString(), " but a write to index ",
                                                   index, " gives shape ", value.shape().DebugString()));
  }
  // Memory the caller only lent (a numpy feed) must not be kept.
  Tensor own = value;
  if (value.buffer() != nullptr && value.buffer()->borrowed()) {
    own = value.DeepCopy();
    CountCopy(static_cast<int64_t>(value.TotalBytes()));
  }
  absl::MutexLock lock(&mu_);
  RETURN_IF_ERROR(CheckIndex(index, "write", /*growing=*/true));
  if (index >= static_cast<int64_t>(elements_.size())) elements_.resize(static_cast<size_t>(index) + 1);
  Tensor& slot = elements_[static_cast<size_t>(index)];
  if (!options_.gradient && slot.IsInitialized() && !rewrite) {
    return absl::InvalidArgumentError(absl::StrCat(
        "TensorArray '", options_.name, "': cannot write index ", index,
        ": it has already been written (a TensorArray takes one write per index, as in TensorFlow; write each index "
        "once, or write to a new TensorArray)"));
  }
  const bool summable = options_.dtype == DT_FLOAT || options_.dtype == DT_DOUBLE;
  if (!options_.gradient || !slot.IsInitialized() || !summable) {
    slot = std::move(own);
    return absl::OkStatus();
  }
  // Gradient arrays sum what reaches one index from several reads.
  if (slot.shape() != own.shape()) {
    return absl::InvalidArgumentError(absl::StrCat("TensorArray '", options_.name, "': gradients of shapes ",
                                                   slot.shape().DebugString(), " and ", own.shape().DebugString(),
                                                   " reach index ", index));
  }
  Tensor sum = slot.DeepCopy();
  CountCopy(static_cast<int64_t>(sum.TotalBytes()));
  if (options_.dtype == DT_FLOAT) {
    AddInto<float>(own, &sum);
  } else {
    AddInto<double>(own, &sum);
  }
  slot = std::move(sum);
  return absl::OkStatus();
}

bool TensorArray::ZeroShape(int64_t index, TensorShape* shape) const {
  const size_t i = static_cast<size_t>(index);
  if (i < options_.forward_shapes.size() && options_.forward_shapes[i].IsFullyDefined()) {
    *shape = *options_.forward_shapes[i].ToTensorShape();
    return true;
  }
  if (options_.element_shape.IsFullyDefined()) {
    *shape = *options_.element_shape.ToTensorShape();
    return true;
  }
  // The shape the written elements share, if they all agree.
  const Tensor* seen = nullptr;
  for (const Tensor& t : elements_) {
    if (!t.IsInitialized()) continue;
    if (seen != nullptr && seen->shape() != t.shape()) return false;
    seen = &t;
  }
  if (seen == nullptr) return false;
  *shape = seen->shape();
  return true;
}

absl::StatusOr<Tensor> TensorArray::ElementLocked(int64_t index) const {
  RETURN_IF_ERROR(CheckIndex(index, "read", /*growing=*/false));
  const Tensor& t = elements_[static_cast<size_t>(index)];
  if (t.IsInitialized()) return t;
  TensorShape shape;
  if (!ZeroShape(index, &shape)) {
    return absl::InvalidArgumentError(
        absl::StrCat("TensorArray '", options_.name, "': cannot read index ", index,
                     ": it has not been written and the array's element shape is not known (give element_shape)"));
  }
  return Zeros(options_.dtype, shape);
}

void TensorArray::TakeLocked(int64_t index) {
  if (options_.gradient && index >= 0 && index < static_cast<int64_t>(elements_.size())) {
    elements_[static_cast<size_t>(index)] = Tensor();
  }
}

absl::StatusOr<Tensor> TensorArray::Read(int64_t index) {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(Tensor t, ElementLocked(index));
  TakeLocked(index);
  return t;
}

absl::StatusOr<Tensor> TensorArray::Gather(const std::vector<int64_t>& indices, const PartialShape& element_shape) {
  absl::MutexLock lock(&mu_);
  std::vector<Tensor> parts;
  parts.reserve(indices.size());
  for (int64_t i : indices) {
    ASSIGN_OR_RETURN(Tensor t, ElementLocked(i));
    if (!parts.empty() && t.shape() != parts[0].shape()) {
      return absl::InvalidArgumentError(
          absl::StrCat("TensorArray '", options_.name, "': cannot stack elements of different shapes: index ",
                       indices[0], " has shape ", parts[0].shape().DebugString(), " and index ", i, " has ",
                       t.shape().DebugString(), " (concat joins elements of different lengths)"));
    }
    parts.push_back(std::move(t));
  }
  for (int64_t i : indices) TakeLocked(i);
  TensorShape shape;
  if (!parts.empty()) {
    shape = parts[0].shape();
  } else {
    PartialShape es = element_shape.IsFullyDefined() ? element_shape : options_.element_shape;
    if (!es.IsFullyDefined()) {
      TensorShape known;
      if (!ZeroShape(0, &known)) {
        return absl::InvalidArgumentError(absl::StrCat("TensorArray '", options_.name,
                                                       "': cannot stack no elements of an unknown element shape "
                                                       "(give element_shape)"));
      }
      es = PartialShape(known);
    }
    shape = *es.ToTensorShape();
  }
  TensorShape out_shape({static_cast<int64_t>(parts.size())});
  for (int64_t d : shape.dim_sizes()) RETURN_IF_ERROR(out_shape.AddDim(d));
  ASSIGN_OR_RETURN(Tensor out, Tensor::Allocate(options_.dtype, out_shape));
  int64_t at = 0;
  for (const Tensor& t : parts) {
    CopyInto(t, &out, at);
    at += t.NumElements();
  }
  return out;
}

absl::Status TensorArray::Concat(const PartialShape& element_shape_except0, Tensor* value,
                                 std::vector<int64_t>* lengths) {
  absl::MutexLock lock(&mu_);
  std::vector<Tensor> parts;
  lengths->clear();
  for (size_t i = 0; i < elements_.size(); ++i) {
    ASSIGN_OR_RETURN(Tensor t, ElementLocked(static_cast<int64_t>(i)));
    if (t.dims() == 0) {
      return absl::InvalidArgumentError(absl::StrCat("TensorArray '", options_.name, "': cannot concat index ", i,
                                                     ", a scalar (concat needs elements of rank 1 or more)"));
    }
    if (!parts.empty()) {
      TensorShape a = parts[0].shape(), b = t.shape();
      a.RemoveDim(0);
      b.RemoveDim(0);
      if (a != b) {
        return absl::InvalidArgumentError(absl::StrCat(
            "TensorArray '", options_.name, "': cannot concat index 0 of shape ", parts[0].shape().DebugString(),
            " with index ", i, " of shape ", t.shape().DebugString(), ": only the first dimension may differ"));
      }
    }
    lengths->push_back(t.dim_size(0));
    parts.push_back(std::move(t));
  }
  for (size_t i = 0; i < elements_.size(); ++i) TakeLocked(static_cast<int64_t>(i));
  TensorShape shape;
  if (!parts.empty()) {
    shape = parts[0].shape();
    int64_t rows = 0;
    for (int64_t n : *lengths) rows += n;
    RETURN_IF_ERROR(shape.SetDim(0, rows));
  } else {
    if (!element_shape_except0.IsFullyDefined()) {
      return absl::InvalidArgumentError(
          absl::StrCat("TensorArray '", options_.name, "': cannot concat no elements of an unknown element shape"));
    }
    shape = TensorShape({0});
    for (int64_t d : element_shape_except0.dims()) RETURN_IF_ERROR(shape.AddDim(d));
  }
  ASSIGN_OR_RETURN(*value, Tensor::Allocate(options_.dtype, shape));
  int64_t at = 0;
  for (const Tensor& t : parts) {
    CopyInto(t, value, at);
    at += t.NumElements();
  }
  return absl::OkStatus();
}

int64_t TensorArray::Size() const {
  absl::ReaderMutexLock lock(&mu_);
  return static_cast<int64_t>(elements_.size());
}

TensorArray::Options TensorArray::GradientOptions(const std::string& source) const {
  absl::ReaderMutexLock lock(&mu_);
  Options o;
  o.name = absl::StrCat(options_.name, "@", source);
  o.dtype = options_.dtype;
  o.size = static_cast<int64_t>(elements_.size());
  o.dynamic_size = options_.dynamic_size;
  o.element_shape = options_.element_shape;
  o.gradient = true;
  for (const Tensor& t : elements_) {
    o.forward_shapes.push_back(t.IsInitialized() ? PartialShape(t.shape()) : PartialShape::Unknown());
  }
  return o;
}

}  // namespace distflow
