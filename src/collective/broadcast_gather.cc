// Broadcast and all-gather (algorithms.h): direct sends between every pair,
// which suits the small group sizes and the one-off broadcasts of initial
// values they serve today. A gather's inputs may differ in their first
// dimension (Horovod's allgather): every rank sends its own shape with its
// data, so no extra round is needed.
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "collective/algorithms.h"

namespace distflow {
namespace {

// Collects one tensor from every other rank under `tag`, then calls
// `finish` with them (this rank's slot holds `mine`).
class FromEveryRank : public std::enable_shared_from_this<FromEveryRank> {
 public:
  using Finish = std::function<void(absl::Status, std::vector<Tensor>)>;
  FromEveryRank(std::shared_ptr<CollectiveChannel> ch, std::string tag, Tensor mine, Finish finish)
      : ch_(std::move(ch)), tag_(std::move(tag)), parts_(static_cast<size_t>(ch_->size())), finish_(std::move(finish)) {
    parts_[static_cast<size_t>(ch_->rank())] = std::move(mine);
    remaining_ = ch_->size() - 1;
  }

  void Start() {
    const int n = ch_->size(), rank = ch_->rank();
    for (int r = 0; r < n; ++r) {
      if (r == rank) continue;
      if (absl::Status s = ch_->Send(r, tag_, parts_[static_cast<size_t>(rank)]); !s.ok()) {
        ch_->Abort(s);
        finish_(s, {});
        return;
      }
    }
    if (remaining_ == 0) {
      finish_(absl::OkStatus(), std::move(parts_));
      return;
    }
    for (int r = 0; r < n; ++r) {
      if (r == rank) continue;
      ch_->RecvAsync(r, tag_, [self = shared_from_this(), r](absl::Status s, Tensor t) { self->Got(r, s, t); });
    }
  }

 private:
  void Got(int r, const absl::Status& s, Tensor t) {
    bool last = false, abort = false;
    absl::Status result;
    {
      absl::MutexLock lock(&mu_);
      if (s.ok()) {
        parts_[static_cast<size_t>(r)] = std::move(t);
      } else if (status_.ok()) {
        status_ = s;
        abort = true;
      }
      last = --remaining_ == 0;
      result = status_;
    }
    if (abort) ch_->Abort(s);
    if (last) finish_(result, std::move(parts_));  // no writer is left
  }

  const std::shared_ptr<CollectiveChannel> ch_;
  const std::string tag_;
  absl::Mutex mu_;
  std::vector<Tensor> parts_;  // each slot written once (under mu_), read after the last
  int remaining_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status status_ ABSL_GUARDED_BY(mu_);
  Finish finish_;
};

// Whether `a` can be concatenated with `b` along dimension 0.
bool SameAfterFirstDim(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.dims() != b.dims() || a.dims() == 0) return false;
  for (int d = 1; d < a.dims(); ++d) {
    if (a.dim_size(d) != b.dim_size(d)) return false;
  }
  return true;
}

absl::Status Fail(CollectiveChannel* ch, absl::Status s) {
  ch->Abort(s);
  return s;
}

}  // namespace

void Broadcast(std::shared_ptr<CollectiveChannel> ch, bool is_sender, const Tensor& value, DataType dtype,
               const TensorShape& shape, CollectiveTensorCallback done) {
  if (ch->size() == 1) {
    if (is_sender) {
      done(value);
    } else {
      done(absl::InvalidArgumentError("a group of one has no other rank to receive a broadcast from"));
    }
    return;
  }
  if (is_sender) {  // the data can go at once; the roles round checks that no other rank sends too
    for (int r = 0; r < ch->size(); ++r) {
      if (r == ch->rank()) continue;
      if (absl::Status s = ch->Send(r, "data", value); !s.ok()) {
        done(Fail(ch.get(), s));
        return;
      }
    }
  }
  Tensor role(DT_INT32, TensorShape({}));
  role.scalar<int32_t>() = is_sender ? 1 : 0;
  auto roles = std::make_shared<FromEveryRank>(
      ch, "role", role,
      [ch, is_sender, value, dtype, shape, done = std::move(done)](absl::Status s, std::vector<Tensor> parts) {
        if (!s.ok()) return done(s);
        std::vector<int> senders;
        for (size_t r = 0; r < parts.size(); ++r) {
          if (parts[r].dtype() != DT_INT32 || parts[r].NumElements() != 1) {
            return done(Fail(ch.get(), absl::InvalidArgumentError(absl::StrCat(ch->RankName(static_cast<int>(r)),
                                                                               " sent a malformed broadcast role"))));
          }
          if (parts[r].scalar<int32_t>() != 0) senders.push_back(static_cast<int>(r));
        }
        if (senders.size() != 1) {
          std::vector<std::string> names;
          for (int r : senders) names.push_back(ch->RankName(r));
          return done(Fail(ch.get(), absl::InvalidArgumentError(absl::StrCat(
                                         "a broadcast needs exactly one rank running CollectiveBcastSend and the "
                                         "others CollectiveBcastRecv; ",
                                         senders.empty() ? "none sends"
                                                         : absl::StrCat(absl::StrJoin(names, " and "), " all send")))));
        }
        if (is_sender) return done(value);
        const int root = senders[0];
        ch->RecvAsync(root, "data", [ch, root, dtype, shape, done](absl::Status s, Tensor t) {
          if (s.ok() && (t.dtype() != dtype || t.shape() != shape)) {
            s = Fail(ch.get(), absl::InvalidArgumentError(
                                   absl::StrCat(ch->RankName(root), " broadcast ", DataTypeName(t.dtype()), " ",
                                                t.shape().DebugString(), " but ", ch->RankName(ch->rank()), " expects ",
                                                DataTypeName(dtype), " ", shape.DebugString())));
          }
          if (!s.ok()) return done(s);
          done(std::move(t));
        });
      });
  roles->Start();
}

void AllGather(std::shared_ptr<CollectiveChannel> ch, const Tensor& value, CollectiveTensorCallback done) {
  if (value.dims() == 0) {
    done(absl::InvalidArgumentError("CollectiveGather needs an input of rank 1 or more, got a scalar"));
    return;
  }
  auto gather = std::make_shared<FromEveryRank>(
      ch, "gather", value, [ch, value, done = std::move(done)](absl::Status s, std::vector<Tensor> parts) {
        if (!s.ok()) return done(s);
        int64_t rows = 0;
        for (size_t r = 0; r < parts.size(); ++r) {
          if (!SameAfterFirstDim(parts[r], value)) {
            return done(
                Fail(ch.get(), absl::InvalidArgumentError(absl::StrCat(
                                   ch->RankName(static_cast<int>(r)), " gathers ", DataTypeName(parts[r].dtype()), " ",
                                   parts[r].shape().DebugString(), " but ", ch->RankName(ch->rank()), " gathers ",
                                   DataTypeName(value.dtype()), " ", value.shape().DebugString(),
                                   ": every rank must gather the same dtype and the same dimensions after the first "
                                   "(the first may differ)"))));
          }
          rows += parts[r].dim_size(0);
        }
        TensorShape out_shape = value.shape();
        if (absl::Status st = out_shape.SetDim(0, rows); !st.ok()) return done(st);
        Tensor out(value.dtype(), out_shape);
        char* dst = static_cast<char*>(out.raw_data());
        for (const Tensor& part : parts) {
          if (part.TotalBytes() == 0) continue;
          std::memcpy(dst, part.raw_data(), part.TotalBytes());
          dst += part.TotalBytes();
        }
        done(std::move(out));
      });
  gather->Start();
}

}  // namespace distflow
