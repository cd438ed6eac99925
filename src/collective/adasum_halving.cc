// Adasum's vector-halving form (adasum.h, AdasumAlgorithm::kVectorHalving):
// Horovod's recursive vector-halving distance-doubling over ranks 0..p-1,
// then the reverse rounds gather the result. Ranks p..n-1 are folded in and
// out exactly as in the whole-tensor form (AdasumRun, adasum_internal.h).
//
// A state machine over the channel's callbacks: each step starts the next
// from its receive's callback, so one receive at most is pending per run and
// no state needs a lock.
#include <array>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "collective/adasum.h"
#include "collective/adasum_internal.h"

namespace distflow {
namespace {

// a.b, |a|^2, |b|^2 over `len` elements, in float64.
template <typename T>
std::array<double, 3> Dots(const void* av, const void* bv, int64_t len) {
  const T* a = static_cast<const T*>(av);
  const T* b = static_cast<const T*>(bv);
  std::array<double, 3> d = {0, 0, 0};
  for (int64_t i = 0; i < len; ++i) {
    const double x = static_cast<double>(a[i]), y = static_cast<double>(b[i]);
    d[0] += x * y;
    d[1] += x * x;
    d[2] += y * y;
  }
  return d;
}

// out = ca a + cb b, element by element (out may be a or b).
template <typename T>
void Mix(const void* av, const void* bv, double ca, double cb, void* outv, int64_t len) {
  const T* a = static_cast<const T*>(av);
  const T* b = static_cast<const T*>(bv);
  T* out = static_cast<T*>(outv);
  for (int64_t i = 0; i < len; ++i) {
    out[i] = static_cast<T>(ca * static_cast<double>(a[i]) + cb * static_cast<double>(b[i]));
  }
}

class VectorHalving final : public AdasumRun {
 public:
  VectorHalving(std::shared_ptr<CollectiveChannel> ch, Tensor buf, CollectiveStatusCallback done)
      : AdasumRun(std::move(ch), std::move(buf), std::move(done)),
        count_(buf_.NumElements()),
        elem_(static_cast<int64_t>(DataTypeSize(buf_.dtype()))),
        hi_(count_) {}

 private:
  void Rounds() override { Halve(1); }
  std::shared_ptr<VectorHalving> Self() { return std::static_pointer_cast<VectorHalving>(shared_from_this()); }

  // Round d of the reduce-scatter: keep one half of [lo_, hi_), send the
  // other to rank ^ d, combine the kept half with the partner's.
  void Halve(int d) {
    if (d >= p_) return Gather(p_ / 2);
    const int partner = rank_ ^ d;
    const bool lower = (rank_ & d) == 0;
    const int64_t mid = lo_ + (hi_ - lo_) / 2;
    const int64_t keep_lo = lower ? lo_ : mid, keep_hi = lower ? mid : hi_;
    const std::string tag = absl::StrCat("adasum_rs_", d);
    if (!Sent(partner, tag, lower ? Slice(mid, hi_) : Slice(lo_, mid))) return;
    segments_.emplace_back(lo_, hi_);
    ch_->RecvAsync(partner, tag, [self = Self(), partner, d, keep_lo, keep_hi](absl::Status s, Tensor got) {
      if (s.ok()) s = self->Check(partner, got, keep_hi - keep_lo);
      if (!s.ok()) return self->Fail(s);
      self->lo_ = keep_lo;
      self->hi_ = keep_hi;
      self->other_ = std::move(got);
      const auto [a, b] = self->Operands(d);
      const std::array<double, 3> dots =
          self->buf_.dtype() == DT_FLOAT ? Dots<float>(a, b, keep_hi - keep_lo) : Dots<double>(a, b, keep_hi - keep_lo);
      self->SumDots(d, 1, {dots[0], dots[1], dots[2], static_cast<double>(self->count_)});
    });
  }

  // The lower rank's operand (a) and the higher's (b) over [lo_, hi_).
  std::pair<const void*, const void*> Operands(int d) const {
    const void* mine = static_cast<const char*>(cur_.raw_data()) + lo_ * elem_;
    const void* theirs = other_.raw_data();
    return (rank_ & d) == 0 ? std::make_pair(mine, theirs) : std::make_pair(theirs, mine);
  }

  // The partial dot products summed over the 2d ranks that hold the round's
  // operands between them, by recursive doubling (e = 1, 2, ..., d). Both
  // ranks of a pair add the same two numbers, so all 2d end equal. The 4th
  // value is the element count, which every rank must share.
  void SumDots(int d, int e, std::array<double, 4> sums) {
    if (e > d) return Apply(d, sums);
    const int partner = rank_ ^ e;
    const std::string tag = absl::StrCat("adasum_dot_", d, "_", e);
    Tensor mine(DT_DOUBLE, TensorShape({4}));
    for (size_t i = 0; i < 4; ++i) mine.flat<double>()[i] = sums[i];
    if (!Sent(partner, tag, mine)) return;
    ch_->RecvAsync(partner, tag, [self = Self(), partner, d, e, sums](absl::Status s, Tensor got) mutable {
      if (s.ok() && (got.dtype() != DT_DOUBLE || got.NumElements() != 4)) {
        s = absl::InvalidArgumentError(
            absl::StrCat(self->ch_->RankName(partner), " sent malformed Adasum dot products"));
      }
      if (s.ok() && got.flat<double>()[3] != sums[3]) {
        s = absl::InvalidArgumentError(absl::StrCat(self->ch_->RankName(partner), " reduces ", got.flat<double>()[3],
                                                    " elements where ", self->ch_->RankName(self->rank_), " reduces ",
                                                    self->count_,
                                                    ": every rank must run the op with the same dtype and shape"));
      }
      if (!s.ok()) return self->Fail(s);
      for (size_t i = 0; i < 3; ++i) sums[i] += got.flat<double>()[i];
      self->SumDots(d, 2 * e, sums);
    });
  }

  void Apply(int d, const std::array<double, 4>& sums) {
    // A zero vector has no direction to project out: the other stays as it is.
    const double ca = sums[1] > 0 ? 1.0 - sums[0] / (2.0 * sums[1]) : 1.0;
    const double cb = sums[2] > 0 ? 1.0 - sums[0] / (2.0 * sums[2]) : 1.0;
    const auto [a, b] = Operands(d);
    void* out = static_cast<char*>(cur_.raw_data()) + lo_ * elem_;
    if (buf_.dtype() == DT_FLOAT) {
      Mix<float>(a, b, ca, cb, out, hi_ - lo_);
    } else {
      Mix<double>(a, b, ca, cb, out, hi_ - lo_);
    }
    other_ = Tensor();
    Halve(2 * d);
  }

  // Round d of the all-gather: swap parts with rank ^ d, doubling [lo_, hi_)
  // back to the segment it was halved from.
  void Gather(int d) {
    if (d < 1) return Unfold();
    const int partner = rank_ ^ d;
    const int64_t plo = segments_.back().first, phi = segments_.back().second;
    segments_.pop_back();
    const std::string tag = absl::StrCat("adasum_ag_", d);
    if (!Sent(partner, tag, Slice(lo_, hi_))) return;
    const int64_t other_lo = lo_ == plo ? hi_ : plo, other_hi = lo_ == plo ? phi : lo_;
    ch_->RecvAsync(partner, tag, [self = Self(), partner, d, plo, phi, other_lo, other_hi](absl::Status s, Tensor got) {
      if (s.ok()) s = self->Check(partner, got, other_hi - other_lo);
      if (!s.ok()) return self->Fail(s);
      if (got.TotalBytes() > 0) {
        std::memcpy(static_cast<char*>(self->cur_.raw_data()) + other_lo * self->elem_, got.raw_data(),
                    got.TotalBytes());
      }
      self->lo_ = plo;
      self->hi_ = phi;
      self->Gather(d / 2);
    });
  }

  // A copy of cur_[lo, hi): what is sent must not change afterwards.
  Tensor Slice(int64_t lo, int64_t hi) const {
    Tensor t(buf_.dtype(), TensorShape({hi - lo}));
    if (hi > lo) std::memcpy(t.raw_data(), static_cast<const char*>(cur_.raw_data()) + lo * elem_, t.TotalBytes());
    return t;
  }

  Tensor other_;  // the partner's half in a reduce-scatter round
  const int64_t count_, elem_;
  int64_t lo_ = 0, hi_;                                // the part of cur_ this rank holds
  std::vector<std::pair<int64_t, int64_t>> segments_;  // what each round halved, for the gather
};

}  // namespace

void StartVectorHalvingAdasum(std::shared_ptr<CollectiveChannel> ch, Tensor buf, CollectiveStatusCallback done) {
  std::shared_ptr<AdasumRun> run = std::make_shared<VectorHalving>(std::move(ch), std::move(buf), std::move(done));
  run->Start();
}

}  // namespace distflow
