#include "collective/algorithms.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "collective/reduce_ops.h"

namespace distflow {
namespace {

int Mod(int a, int n) { return ((a % n) + n) % n; }

// What `from` sent must match what this rank expects, element for element.
absl::Status CheckPart(const CollectiveChannel& ch, int from, const Tensor& got, DataType dtype, int64_t elements) {
  if (got.dtype() == dtype && got.NumElements() == elements) return absl::OkStatus();
  if (got.dtype() == DT_UINT8 && (dtype == DT_FLOAT || dtype == DT_DOUBLE)) {  // fp16_channel.h's bits
    return absl::InvalidArgumentError(absl::StrCat(
        ch.RankName(from), " sent fp16-compressed values where ", ch.RankName(ch.rank()), " expected uncompressed ",
        DataTypeName(dtype), ": every rank must run the op with the same compression"));
  }
  return absl::InvalidArgumentError(absl::StrCat(ch.RankName(from), " sent ", DataTypeName(got.dtype()), " ",
                                                 got.shape().DebugString(), " where ", ch.RankName(ch.rank()),
                                                 " expected ", elements, " elements of ", DataTypeName(dtype),
                                                 ": every rank must run the op with the same dtype and shape"));
}

// Counts the parts of a run still going and keeps its first error; the
// first error aborts the channel so that the other parts and the peers end.
class RunTracker {
 public:
  RunTracker(std::shared_ptr<CollectiveChannel> ch, int parts, CollectiveStatusCallback done)
      : ch_(std::move(ch)), remaining_(parts), done_(std::move(done)) {}

  // One part ended with `s`. Returns true for the last one (done has run).
  void PartDone(const absl::Status& s, const std::function<absl::Status()>& on_success = nullptr) {
    bool abort = false, last = false;
    absl::Status result;
    {
      absl::MutexLock lock(&mu_);
      if (!s.ok() && status_.ok()) {
        status_ = s;
        abort = true;
      }
      last = --remaining_ == 0;
      result = status_;
    }
    if (abort) ch_->Abort(s);
    if (!last) return;
    if (result.ok() && on_success) result = on_success();
    done_(result);
  }
  bool failed() {
    absl::MutexLock lock(&mu_);
    return !status_.ok();
  }

 private:
  const std::shared_ptr<CollectiveChannel> ch_;
  absl::Mutex mu_;
  int remaining_ ABSL_GUARDED_BY(mu_);
  absl::Status status_ ABSL_GUARDED_BY(mu_);
  CollectiveStatusCallback done_;
};

// One ring all-reduce: `pipeline` independent rings over the parts of `flat`.
class Ring : public std::enable_shared_from_this<Ring> {
 public:
  Ring(std::shared_ptr<CollectiveChannel> ch, Tensor flat, MergeOp merge, FinalOp final_op, int pipeline,
       CollectiveStatusCallback done)
      : ch_(ch),
        flat_(std::move(flat)),
        merge_(merge),
        final_(final_op),
        n_(ch->size()),
        rank_(ch->rank()),
        pipeline_(pipeline),
        tracker_(ch, pipeline, std::move(done)) {}

  void Start() {
    for (int p = 0; p < pipeline_; ++p) Step(p, 0);
  }

 private:
  // Segment `seg` of ring `p`: the piece seg * pipeline + p of the tensor.
  Tensor Piece(int seg, int p) const {
    const int64_t k = static_cast<int64_t>(seg) * pipeline_ + p, pieces = static_cast<int64_t>(n_) * pipeline_;
    const int64_t count = flat_.NumElements();
    return flat_.Slice(count * k / pieces, count * (k + 1) / pieces);
  }

  // Step k of ring p: reduce-scatter for k < n-1, then all-gather. Sends a
  // copy of one segment to the next rank and waits for one from the previous.
  void Step(int p, int k) {
    const bool scatter = k < n_ - 1;
    const int j = scatter ? k : k - (n_ - 1);
    const int send_seg = scatter ? Mod(rank_ - j, n_) : Mod(rank_ + 1 - j, n_);
    const int recv_seg = scatter ? Mod(rank_ - j - 1, n_) : Mod(rank_ - j, n_);
    const std::string tag = absl::StrCat("ring", p, "_", k);
    if (absl::Status s = ch_->Send(Mod(rank_ + 1, n_), tag, Piece(send_seg, p).DeepCopy()); !s.ok()) {
      tracker_.PartDone(s);
      return;
    }
    const int prev = Mod(rank_ - 1, n_);
    ch_->RecvAsync(prev, tag, [self = shared_from_this(), p, k, recv_seg, scatter, prev](absl::Status s, Tensor got) {
      self->Received(p, k, recv_seg, scatter, prev, std::move(s), std::move(got));
    });
  }

  void Received(int p, int k, int recv_seg, bool scatter, int prev, absl::Status s, Tensor got) {
    Tensor dst = Piece(recv_seg, p);
    if (s.ok()) s = CheckPart(*ch_, prev, got, flat_.dtype(), dst.NumElements());
    if (s.ok() && scatter) {
      s = MergeInto(merge_, got, &dst);
      // After the last reduce-scatter step this segment holds every rank's
      // values: finish it before the all-gather spreads it.
      if (s.ok() && k == n_ - 2) s = ApplyFinal(final_, n_, &dst);
    } else if (s.ok() && dst.TotalBytes() > 0) {
      std::memcpy(dst.raw_data(), got.raw_data(), dst.TotalBytes());
    }
    if (!s.ok() || k + 1 == 2 * (n_ - 1) || tracker_.failed()) {
      tracker_.PartDone(s);
      return;
    }
    Step(p, k + 1);
  }

  const std::shared_ptr<CollectiveChannel> ch_;
  const Tensor flat_;  // shares the caller's buffer
  const MergeOp merge_;
  const FinalOp final_;
  const int n_, rank_, pipeline_;
  RunTracker tracker_;
};

class Direct : public std::enable_shared_from_this<Direct> {
 public:
  Direct(std::shared_ptr<CollectiveChannel> ch, Tensor buf, MergeOp merge, FinalOp final_op,
         CollectiveStatusCallback done)
      : ch_(ch),
        buf_(std::move(buf)),
        merge_(merge),
        final_(final_op),
        parts_(static_cast<size_t>(ch->size())),
        tracker_(ch, ch->size() - 1, std::move(done)) {}

  void Start() {
    const int n = ch_->size(), rank = ch_->rank();
    Tensor mine = buf_.DeepCopy();  // buf_ becomes the result; peers may read this later
    parts_[static_cast<size_t>(rank)] = mine;
    for (int r = 0; r < n; ++r) {
      if (r == rank) continue;
      if (absl::Status s = ch_->Send(r, "all", mine); !s.ok()) {
        for (int peer = 0; peer < n; ++peer)  // no receive is posted yet: end every part
          if (peer != rank) tracker_.PartDone(s);
        return;
      }
    }
    for (int r = 0; r < n; ++r) {
      if (r == rank) continue;
      ch_->RecvAsync(r, "all", [self = shared_from_this(), r](absl::Status s, Tensor got) {
        if (s.ok()) s = CheckPart(*self->ch_, r, got, self->buf_.dtype(), self->buf_.NumElements());
        if (s.ok()) self->parts_[static_cast<size_t>(r)] = std::move(got);  // distinct slots: no lock needed
        self->tracker_.PartDone(s, [self] { return self->Combine(); });
      });
    }
  }

 private:
  // Every rank reduces the parts in rank order, so all get the same bytes.
  absl::Status Combine() {
    if (buf_.TotalBytes() > 0) std::memcpy(buf_.raw_data(), parts_[0].raw_data(), buf_.TotalBytes());
    for (size_t r = 1; r < parts_.size(); ++r) {
      if (absl::Status s = MergeInto(merge_, parts_[r], &buf_); !s.ok()) return s;
    }
    return ApplyFinal(final_, ch_->size(), &buf_);
  }

  const std::shared_ptr<CollectiveChannel> ch_;
  Tensor buf_;
  const MergeOp merge_;
  const FinalOp final_;
  std::vector<Tensor> parts_;  // one writer per slot; read after the last
  RunTracker tracker_;
};

int PipelineFor(int64_t bytes, int n) {
  const int64_t per_ring = static_cast<int64_t>(n) * kPipelinePieceBytes;
  return static_cast<int>(std::clamp<int64_t>((bytes + per_ring - 1) / per_ring, 1, kMaxPipeline));
}

}  // namespace

void RingAllReduce(std::shared_ptr<CollectiveChannel> ch, Tensor buf, MergeOp merge, FinalOp final_op, int pipeline,
                   CollectiveStatusCallback done) {
  if (ch->size() == 1 || buf.NumElements() == 0) {
    done(ApplyFinal(final_op, ch->size(), &buf));
    return;
  }
  absl::StatusOr<Tensor> flat = buf.Reshaped(TensorShape({buf.NumElements()}));
  if (!flat.ok()) {
    done(flat.status());
    return;
  }
  if (pipeline <= 0) pipeline = PipelineFor(static_cast<int64_t>(buf.TotalBytes()), ch->size());
  auto ring = std::make_shared<Ring>(ch, std::move(*flat), merge, final_op, pipeline, std::move(done));
  ring->Start();
}

void DirectAllReduce(std::shared_ptr<CollectiveChannel> ch, Tensor buf, MergeOp merge, FinalOp final_op,
                     CollectiveStatusCallback done) {
  // An empty tensor is exchanged too: a rank must not finish on its own
  // while a peer of another size waits for it (shape_check.h fails them all).
  if (ch->size() == 1) {
    done(ApplyFinal(final_op, ch->size(), &buf));
    return;
  }
  auto direct = std::make_shared<Direct>(ch, std::move(buf), merge, final_op, std::move(done));
  direct->Start();
}

bool AllReduceUsesRing(const Tensor& buf, int n) {
  return static_cast<int64_t>(buf.TotalBytes()) >= kRingMinBytes && buf.NumElements() >= n;
}

void AllReduce(std::shared_ptr<CollectiveChannel> ch, Tensor buf, MergeOp merge, FinalOp final_op,
               CollectiveStatusCallback done) {
  if (!IsCollectiveDtype(buf.dtype())) {
    done(absl::InvalidArgumentError(
        absl::StrCat("collectives reduce float32, float64, int32 and int64, not ", DataTypeName(buf.dtype()))));
    return;
  }
  if (AllReduceUsesRing(buf, ch->size())) {
    RingAllReduce(std::move(ch), std::move(buf), merge, final_op, 0, std::move(done));
  } else {
    DirectAllReduce(std::move(ch), std::move(buf), merge, final_op, std::move(done));
  }
}

}  // namespace distflow
