#include "collective/shape_check.h"

#include <atomic>
#include <cstdint>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"

namespace distflow {
namespace {

constexpr uint32_t kMagic = 0x48434644;  // "DFCH"

const char* MergeName(MergeOp m) {
  switch (m) {
    case MergeOp::kAdd:
      return "Add";
    case MergeOp::kMul:
      return "Mul";
    case MergeOp::kMax:
      return "Max";
    case MergeOp::kMin:
      return "Min";
    case MergeOp::kAdasum:
      return "Adasum";
  }
  return "?";
}

// Native byte order: both ends run this code on the same kind of machine,
// as the rest of the tensor bytes assume.
class Writer {
 public:
  void I64(int64_t v) { Raw(&v, sizeof v); }
  void Shape(const TensorShape& s) {
    I64(s.dims());
    for (int64_t d : s.dim_sizes()) I64(d);
  }
  void Raw(const void* p, size_t n) {
    const auto* c = static_cast<const unsigned char*>(p);
    bytes_.insert(bytes_.end(), c, c + n);
  }
  std::vector<unsigned char>& bytes() { return bytes_; }

 private:
  std::vector<unsigned char> bytes_;
};

class Reader {
 public:
  Reader(const unsigned char* p, size_t n) : p_(p), n_(n) {}
  bool I64(int64_t* v) {
    if (n_ - pos_ < sizeof *v) return false;
    std::memcpy(v, p_ + pos_, sizeof *v);
    pos_ += sizeof *v;
    return true;
  }
  bool Shape(TensorShape* s) {
    int64_t dims = 0;
    if (!I64(&dims) || dims < 0 || dims > TensorShape::kMaxRank) return false;
    std::vector<int64_t> d(static_cast<size_t>(dims));
    for (int64_t& x : d)
      if (!I64(&x)) return false;
    absl::StatusOr<TensorShape> shape = TensorShape::FromDims(d);
    if (!shape.ok()) return false;
    *s = std::move(*shape);
    return true;
  }
  const unsigned char* rest() const { return p_ + pos_; }
  size_t remaining() const { return n_ - pos_; }

 private:
  const unsigned char* p_;
  size_t n_;
  size_t pos_ = 0;
};

void WriteSignature(Writer* w, const ReduceSignature& sig) {
  w->I64(kMagic);
  w->I64(sig.dtype);
  w->I64(static_cast<int64_t>(sig.merge));
  w->I64(sig.fp16 ? 1 : 0);
  w->Shape(sig.shape);
}

bool ReadSignature(Reader* r, ReduceSignature* sig) {
  int64_t magic = 0, dtype = 0, merge = 0, fp16 = 0;
  if (!r->I64(&magic) || magic != kMagic || !r->I64(&dtype) || !r->I64(&merge) || !r->I64(&fp16)) return false;
  if (merge < 0 || merge > static_cast<int64_t>(MergeOp::kAdasum) || (fp16 != 0 && fp16 != 1)) return false;
  if (DataTypeSize(static_cast<DataType>(dtype)) == 0) return false;
  sig->dtype = static_cast<DataType>(dtype);
  sig->merge = static_cast<MergeOp>(merge);
  sig->fp16 = fp16 == 1;
  return r->Shape(&sig->shape);
}

bool operator==(const ReduceSignature& a, const ReduceSignature& b) {
  return a.dtype == b.dtype && a.shape == b.shape && a.merge == b.merge && a.fp16 == b.fp16;
}

// [signature][payload dtype][payload shape][payload bytes], as uint8.
Tensor Pack(const ReduceSignature& sig, const Tensor& payload) {
  Writer w;
  WriteSignature(&w, sig);
  w.I64(payload.dtype());
  w.Shape(payload.shape());
  const size_t head = w.bytes().size();
  Tensor out(DT_UINT8, TensorShape({static_cast<int64_t>(head + payload.TotalBytes())}));
  auto* dst = static_cast<unsigned char*>(out.raw_data());
  std::memcpy(dst, w.bytes().data(), head);
  if (payload.TotalBytes() > 0) std::memcpy(dst + head, payload.raw_data(), payload.TotalBytes());
  return out;
}

class ShapeCheckedChannel final : public CollectiveChannel {
 public:
  ShapeCheckedChannel(std::shared_ptr<CollectiveChannel> inner, ReduceSignature sig)
      : inner_(std::move(inner)),
        sig_(std::move(sig)),
        sent_(static_cast<size_t>(inner_->size())),
        received_(static_cast<size_t>(inner_->size())) {}

  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  std::string RankName(int r) const override { return inner_->RankName(r); }
  void Abort(const absl::Status& status) override { inner_->Abort(status); }

  absl::Status Send(int to, const std::string& tag, const Tensor& value) override {
    if (sent_[static_cast<size_t>(to)].exchange(true)) return inner_->Send(to, tag, value);
    return inner_->Send(to, kFirstMessageTag, Pack(sig_, value));
  }

  void RecvAsync(int from, const std::string& tag, RecvCallback done) override {
    if (received_[static_cast<size_t>(from)].exchange(true)) {
      inner_->RecvAsync(from, tag, std::move(done));
      return;
    }
    inner_->RecvAsync(
        from, kFirstMessageTag, [inner = inner_, sig = sig_, from, done = std::move(done)](absl::Status s, Tensor got) {
          absl::StatusOr<Tensor> payload = s.ok() ? Unpack(*inner, sig, from, got) : absl::StatusOr<Tensor>(s);
          if (!payload.ok()) {
            // The stall check's announcements ignore their receive's status:
            // abort here so that every wait of the run ends with this error.
            if (s.ok()) inner->Abort(payload.status());
            done(payload.status(), Tensor());
            return;
          }
          done(absl::OkStatus(), std::move(*payload));
        });
  }

 private:
  static absl::StatusOr<Tensor> Unpack(const CollectiveChannel& ch, const ReduceSignature& mine, int from,
                                       const Tensor& got) {
    const auto malformed = [&] {
      return absl::InvalidArgumentError(absl::StrCat(
          ch.RankName(from), " sent a malformed first message (", DataTypeName(got.dtype()), " ",
          got.shape().DebugString(), ") to ", ch.RankName(ch.rank()), ": do both run the same version of distflow?"));
    };
    if (got.dtype() != DT_UINT8) return malformed();
    Reader r(static_cast<const unsigned char*>(got.raw_data()), got.TotalBytes());
    ReduceSignature theirs;
    if (!ReadSignature(&r, &theirs)) return malformed();
    if (!(theirs == mine)) {
      return absl::InvalidArgumentError(absl::StrCat(
          ch.RankName(from), " runs this CollectiveReduce on ", theirs.DebugString(), " where ", ch.RankName(ch.rank()),
          " runs it on ", mine.DebugString(),
          ": every rank must run the op with the same dtype and shape, the same merge_op and the same compression"));
    }
    int64_t dtype = 0;
    TensorShape shape;
    if (!r.I64(&dtype) || DataTypeSize(static_cast<DataType>(dtype)) == 0 || !r.Shape(&shape)) return malformed();
    const size_t bytes = DataTypeSize(static_cast<DataType>(dtype)) * static_cast<size_t>(shape.num_elements());
    if (r.remaining() != bytes) return malformed();
    Tensor out(static_cast<DataType>(dtype), shape);
    if (bytes > 0) std::memcpy(out.raw_data(), r.rest(), bytes);
    return out;
  }

  const std::shared_ptr<CollectiveChannel> inner_;
  const ReduceSignature sig_;
  std::vector<std::atomic<bool>> sent_, received_;  // per peer: its first message has gone / been asked for
};

}  // namespace

std::string ReduceSignature::DebugString() const {
  std::string out = absl::StrCat(DataTypeName(dtype), " ", shape.DebugString());
  if (merge != MergeOp::kAdd) absl::StrAppend(&out, " merge_op ", MergeName(merge));
  if (fp16) absl::StrAppend(&out, " compression fp16");
  return out;
}

int64_t FirstMessageOverheadBytes(const ReduceSignature& signature, const TensorShape& payload) {
  return Pack(signature, Tensor(DT_UINT8, payload)).NumElements() - payload.num_elements();
}

std::shared_ptr<CollectiveChannel> MakeShapeCheckedChannel(std::shared_ptr<CollectiveChannel> inner,
                                                           ReduceSignature signature) {
  return std::make_shared<ShapeCheckedChannel>(std::move(inner), std::move(signature));
}

}  // namespace distflow
