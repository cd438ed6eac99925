#include "collective/collective_executor_impl.h"

#include <atomic>

#include "absl/strings/str_cat.h"
#include "base/timer.h"
#include "collective/algorithms.h"
#include "collective/fp16_channel.h"
#include "collective/reduce_ops.h"

namespace distflow {
namespace {

// One run's end: deregisters from the step's cancellation and the timer,
// names the op in errors, then calls the kernel back. Shared by the
// callbacks that can end it.
struct RunEnd {
  std::string what;
  CancellationManager* cm = nullptr;
  CancellationManager::Token token = CancellationManager::kInvalidToken;
  std::atomic<Timer::Id> timer{0};
  std::atomic<bool> timer_fired{false};
  CollectiveExecutor::DoneCallback done;
  std::function<void()> stop_stall_check;

  void Finish(absl::StatusOr<Tensor> result) {
    if (stop_stall_check) stop_stall_check();
    if (cm != nullptr && token != CancellationManager::kInvalidToken) cm->Deregister(token);
    // The timer's own callback may be what ends the run: it must not cancel itself.
    if (const Timer::Id id = timer.load(); id != 0 && !timer_fired.load()) Timer::Global()->Cancel(id);
    if (!result.ok()) {
      result = absl::Status(result.status().code(), absl::StrCat(what, ": ", result.status().message()));
    }
    done(std::move(result));
  }
};

}  // namespace

int64_t CollectiveExecutorImpl::NextSeq(int64_t group_key, int64_t instance_key) {
  absl::MutexLock lock(&mu_);
  return next_seq_[{group_key, instance_key}]++;
}

void CollectiveExecutorImpl::Run(const CollectiveParams& params, const Tensor& input, CancellationManager* cm,
                                 DoneCallback done) {
  if (params.kind != CollectiveKind::kBroadcastRecv && !IsCollectiveDtype(input.dtype())) {
    done(absl::InvalidArgumentError(absl::StrCat(DescribeCollective(params),
                                                 ": collectives take float32, float64, "
                                                 "int32 and int64, not ",
                                                 DataTypeName(input.dtype()))));
    return;
  }
  const int64_t seq = NextSeq(params.group_key, params.instance_key);
  absl::StatusOr<std::shared_ptr<CollectiveChannel>> opened = transport_->Open(params, seq);
  if (!opened.ok()) {
    done(absl::Status(opened.status().code(),
                      absl::StrCat(DescribeCollective(params), ": ", opened.status().message())));
    return;
  }
  auto end = std::make_shared<RunEnd>();
  end->what = absl::StrCat(DescribeCollective(params), ", run ", seq, " on ", (*opened)->RankName((*opened)->rank()));
  end->done = std::move(done);
  WatchedChannel watched = WatchForStalls(*opened, end->what, stall_check_);
  std::shared_ptr<CollectiveChannel> ch = std::move(watched.channel);
  end->stop_stall_check = std::move(watched.stop);
  if (cm != nullptr) {
    end->cm = cm;
    end->token = cm->Register(
        [ch, end] { ch->Abort(absl::CancelledError(absl::StrCat(end->what, ": the step was cancelled"))); });
    if (end->token == CancellationManager::kInvalidToken) {
      end->Finish(absl::CancelledError("the step was cancelled before the collective started"));
      return;
    }
  }
  if (params.timeout_seconds > 0) {
    end->timer = Timer::Global()->After(absl::Seconds(params.timeout_seconds), [ch, end, t = params.timeout_seconds] {
      end->timer_fired = true;
      ch->Abort(absl::DeadlineExceededError(absl::StrCat(end->what, ": not finished after timeout_seconds=", t,
                                                         "; a rank of the group did not join or stopped")));
    });
  }
  auto tensor_done = [end](absl::StatusOr<Tensor> r) { end->Finish(std::move(r)); };
  switch (params.kind) {
    case CollectiveKind::kReduce: {
      Tensor buf = input.DeepCopy();
      const bool fp16 = params.compress_fp16 && (input.dtype() == DT_FLOAT || input.dtype() == DT_DOUBLE);
      if (fp16) {
        RoundToHalf(&buf);  // Horovod's cast to float16 before the all-reduce
        ch = MakeFp16Channel(ch, input.dtype());
      }
      AllReduce(ch, buf, params.merge_op, params.final_op, [buf, end, fp16](absl::Status s) mutable {
        if (!s.ok()) {
          end->Finish(s);
          return;
        }
        // The owner of a ring segment finished it in full precision; the
        // others received it rounded: round here so every rank holds the
        // same fp16 values.
        if (fp16) RoundToHalf(&buf);
        end->Finish(buf);
      });
      return;
    }
    case CollectiveKind::kBroadcastSend:
      Broadcast(ch, true, input, input.dtype(), input.shape(), tensor_done);
      return;
    case CollectiveKind::kBroadcastRecv:
      Broadcast(ch, false, Tensor(), params.dtype, params.shape, tensor_done);
      return;
    case CollectiveKind::kGather:
      AllGather(ch, input, tensor_done);
      return;
  }
}

}  // namespace distflow
