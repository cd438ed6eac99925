// CollectiveExecutorImpl's cycle-time fusion (collective_executor_impl.h):
// which buffer a reduction goes to, and what a buffer asks of the executor
// (channels, fused runs, a thread for the cycle's flushes, failures).
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "collective/collective_executor_impl.h"

namespace distflow {

void CollectiveExecutorImpl::SetFusionTimer(Timer* timer) {
  absl::MutexLock lock(&mu_);
  fusion_timer_ = timer;
}

void CollectiveExecutorImpl::Fuse(CollectiveParams params, const Tensor& input, CancellationManager* cm,
                                  DoneCallback done) {
  params.dtype = input.dtype();
  // What the fused reductions of one stream share: the group (as built),
  // and everything FusionInstanceKey folds in.
  const std::string key =
      absl::StrCat(params.generation, ";", params.group_key, ";", params.elastic ? "elastic" : "", ";",
                   absl::StrJoin(GroupMembers(params), ","), ";", absl::StrJoin(params.member_tasks, ","), ";",
                   FusionInstanceKey(params), ";", params.fusion_cycle_ms, ";", params.fusion_threshold_bytes, ";",
                   params.fusion_set_size, ";", static_cast<int>(params.dtype), ";", static_cast<int>(params.merge_op),
                   ";", static_cast<int>(params.final_op), ";", params.compress_fp16);
  std::shared_ptr<FusionBuffer> buffer;
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) {
      done(absl::CancelledError(
          absl::StrCat(DescribeCollective(params), ": this task's collective executor is shutting down")));
      return;
    }
    auto it = fusion_.find(key);
    if (it == fusion_.end() || it->second->failed()) {
      CollectiveParams stream = params;
      stream.instance_key = FusionInstanceKey(params);
      stream.trace = nullptr;
      fusion_[key] = MakeFusionBuffer(key, stream);
      it = fusion_.find(key);
    }
    buffer = it->second;
  }
  buffer->Add(params, input, cm, std::move(done));
}

std::shared_ptr<FusionBuffer> CollectiveExecutorImpl::MakeFusionBuffer(const std::string& key,
                                                                       const CollectiveParams& stream) {
  FusionBuffer::Hooks hooks;
  hooks.open = [this, stream](int64_t k) { return transport_->Open(stream, k); };
  hooks.run = [this](CollectiveParams p, std::shared_ptr<CollectiveChannel> ch, int64_t k, Tensor input,
                     CancellationManager* cm,
                     DoneCallback done) { RunIn(std::move(p), 0, input, cm, std::move(done), std::move(ch), k); };
  hooks.schedule = [this](std::function<void()> fn) {
    {
      absl::MutexLock lock(&mu_);
      if (!stopping_ && fusion_pool_ != nullptr) {
        fusion_pool_->Schedule(std::move(fn));
        return;
      }
    }
    fn();  // shutting down: the flush's run fails at once (its buffer failed)
  };
  // The buffer's own pointer, for its failure (set before its first op).
  auto self = std::make_shared<std::weak_ptr<FusionBuffer>>();
  const GroupId group = GroupOf(stream);
  const bool rebuilds = stream.group_size > 1;
  hooks.failed = [this, key, self, group, rebuilds, generation = stream.generation](const absl::Status&) {
    std::shared_ptr<FusionBuffer> failed = self->lock();
    {
      absl::MutexLock lock(&mu_);
      auto it = fusion_.find(key);
      if (failed != nullptr && it != fusion_.end() && it->second == failed) {
        fusion_next_flush_[key] = failed->next_flush();
        fusion_.erase(it);
      }
    }
    // As any run's failure: with a coordinator, the group is rebuilt.
    if (rebuilds) RunFailed(group, generation);
  };
  auto buffer = std::make_shared<FusionBuffer>(
      stream, fusion_next_flush_[key], fusion_timer_ != nullptr ? fusion_timer_ : Timer::Global(), std::move(hooks));
  *self = buffer;
  return buffer;
}

}  // namespace distflow
