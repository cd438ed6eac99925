#include "collective/adasum.h"

#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "collective/adasum_internal.h"

namespace distflow {
namespace {

template <typename T>
Tensor Combine(const Tensor& a, const Tensor& b) {
  absl::Span<const T> x = a.flat<T>(), y = b.flat<T>();
  double dot = 0, aa = 0, bb = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    dot += static_cast<double>(x[i]) * static_cast<double>(y[i]);
    aa += static_cast<double>(x[i]) * static_cast<double>(x[i]);
    bb += static_cast<double>(y[i]) * static_cast<double>(y[i]);
  }
  // A zero vector has no direction to project out: the other stays as it is.
  const double ca = aa > 0 ? 1.0 - dot / (2.0 * aa) : 1.0;
  const double cb = bb > 0 ? 1.0 - dot / (2.0 * bb) : 1.0;
  Tensor out(a.dtype(), a.shape());
  absl::Span<T> z = out.flat<T>();
  for (size_t i = 0; i < z.size(); ++i) {
    z[i] = static_cast<T>(ca * static_cast<double>(x[i]) + cb * static_cast<double>(y[i]));
  }
  return out;
}

class WholeTensorAdasum final : public AdasumRun {
 public:
  using AdasumRun::AdasumRun;

 private:
  void Rounds() override { Round(1); }

  // Round k of recursive doubling among ranks 0..p-1; after the last, the
  // result goes back to the folded rank, if any.
  void Round(int k) {
    if (k >= p_) return Unfold();
    const int partner = rank_ ^ k;
    const std::string tag = absl::StrCat("adasum_", k);
    if (!Sent(partner, tag, cur_)) return;
    ch_->RecvAsync(partner, tag,
                   [self = std::static_pointer_cast<WholeTensorAdasum>(shared_from_this()), partner, k](absl::Status s,
                                                                                                        Tensor got) {
                     if (s.ok()) s = self->Check(partner, got, self->buf_.NumElements());
                     // The lower rank's operand first on both ranks: the same bytes.
                     if (s.ok()) {
                       s = self->rank_ < partner ? self->CombineInto(self->cur_, got)
                                                 : self->CombineInto(got, self->cur_);
                     }
                     if (!s.ok()) return self->Fail(s);
                     self->Round(2 * k);
                   });
  }

  absl::Status CombineInto(const Tensor& a, const Tensor& b) {
    absl::StatusOr<Tensor> c = AdasumCombine(a, b);
    if (!c.ok()) return c.status();
    cur_ = std::move(*c);  // a new tensor: what was sent stays as it was
    return absl::OkStatus();
  }
};

}  // namespace

AdasumRun::AdasumRun(std::shared_ptr<CollectiveChannel> ch, Tensor buf, CollectiveStatusCallback done)
    : ch_(std::move(ch)),
      buf_(std::move(buf)),
      cur_(buf_.DeepCopy()),
      n_(ch_->size()),
      rank_(ch_->rank()),
      p_(LargestPowerOfTwoAtMost(n_)),
      done_(std::move(done)) {}

void AdasumRun::Start() {
  if (rank_ >= p_) {  // folded into rank - p, which sends the result back
    if (!Sent(rank_ - p_, "adasum_fold", cur_)) return;
    ch_->RecvAsync(rank_ - p_, "adasum_unfold", [self = shared_from_this()](absl::Status s, Tensor got) {
      if (s.ok()) s = self->Check(self->rank_ - self->p_, got, self->buf_.NumElements());
      if (!s.ok()) return self->Fail(s);
      self->cur_ = std::move(got);
      self->Finish();
    });
    return;
  }
  if (rank_ + p_ < n_) {
    ch_->RecvAsync(rank_ + p_, "adasum_fold", [self = shared_from_this()](absl::Status s, Tensor got) {
      if (s.ok()) s = self->Check(self->rank_ + self->p_, got, self->buf_.NumElements());
      if (s.ok()) {
        absl::StatusOr<Tensor> c = AdasumCombine(self->cur_, got);
        if (c.ok()) self->cur_ = std::move(*c);
        s = c.status();
      }
      if (!s.ok()) return self->Fail(s);
      self->Rounds();
    });
    return;
  }
  Rounds();
}

void AdasumRun::Unfold() {
  if (rank_ + p_ < n_ && !Sent(rank_ + p_, "adasum_unfold", cur_)) return;
  Finish();
}

bool AdasumRun::Sent(int to, const std::string& tag, const Tensor& value) {
  absl::Status s = ch_->Send(to, tag, value);
  if (!s.ok()) Fail(s);
  return s.ok();
}

absl::Status AdasumRun::Check(int from, const Tensor& got, int64_t want) const {
  if (got.dtype() == buf_.dtype() && got.NumElements() == want) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(ch_->RankName(from), " sent ", DataTypeName(got.dtype()), " ",
                                                 got.shape().DebugString(), " where ", ch_->RankName(rank_),
                                                 " expected ", want, " elements of ", DataTypeName(buf_.dtype()),
                                                 ": every rank must run the op with the same dtype and shape"));
}

void AdasumRun::Finish() {
  if (buf_.TotalBytes() > 0) std::memcpy(buf_.raw_data(), cur_.raw_data(), buf_.TotalBytes());
  done_(absl::OkStatus());
}

void AdasumRun::Fail(const absl::Status& s) {
  ch_->Abort(s);
  done_(s);
}

absl::StatusOr<Tensor> AdasumCombine(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.NumElements() != b.NumElements()) {
    return absl::InvalidArgumentError(absl::StrCat("Adasum combines tensors of one dtype and size, not ",
                                                   DataTypeName(a.dtype()), " ", a.shape().DebugString(), " and ",
                                                   DataTypeName(b.dtype()), " ", b.shape().DebugString()));
  }
  switch (a.dtype()) {
    case DT_FLOAT:
      return Combine<float>(a, b);
    case DT_DOUBLE:
      return Combine<double>(a, b);
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("Adasum reduces float32 and float64 tensors, not ", DataTypeName(a.dtype())));
  }
}

bool AdasumUsesVectorHalving(const Tensor& buf, int n) {
  return static_cast<int64_t>(buf.TotalBytes()) >= kAdasumHalvingMinBytes && buf.NumElements() >= n;
}

void AdasumAllReduce(std::shared_ptr<CollectiveChannel> ch, Tensor buf, CollectiveStatusCallback done,
                     AdasumAlgorithm algorithm) {
  if (buf.dtype() != DT_FLOAT && buf.dtype() != DT_DOUBLE) {
    done(absl::InvalidArgumentError(
        absl::StrCat("merge_op Adasum reduces float32 and float64 tensors, not ", DataTypeName(buf.dtype()))));
    return;
  }
  if (ch->size() == 1) {
    done(absl::OkStatus());
    return;
  }
  // An empty tensor takes the whole-tensor rounds too (empty messages): a
  // rank must not finish on its own while a peer of another size waits.
  if (buf.NumElements() == 0) algorithm = AdasumAlgorithm::kWholeTensor;
  if (algorithm == AdasumAlgorithm::kAuto) {
    algorithm =
        AdasumUsesVectorHalving(buf, ch->size()) ? AdasumAlgorithm::kVectorHalving : AdasumAlgorithm::kWholeTensor;
  }
  if (algorithm == AdasumAlgorithm::kVectorHalving) {
    StartVectorHalvingAdasum(std::move(ch), std::move(buf), std::move(done));
    return;
  }
  std::shared_ptr<AdasumRun> run = std::make_shared<WholeTensorAdasum>(std::move(ch), std::move(buf), std::move(done));
  run->Start();
}

}  // namespace distflow
