#include "rpc/step_tensor_codec.h"

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "bulk/bulk_transfer.h"
#include "tensor/tensor_codec.h"

namespace distflow {

absl::StatusOr<std::optional<Tensor>> TakeBulkFeed(BulkServer* bulk, const proto::NamedTensor& f,
                                                   const std::string& name, const std::string& local_task) {
  if (f.bulk_ticket() == 0) return std::optional<Tensor>();
  if (bulk == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("Feed '", name, "' names a bulk ticket, but bulk transfer is off on ", local_task));
  }
  ASSIGN_OR_RETURN(auto spec, BulkTensorSpec(f));
  absl::StatusOr<Tensor> t = bulk->TakeReceived(f.bulk_ticket(), spec.first, spec.second);
  if (!t.ok()) return absl::Status(t.status().code(), absl::StrCat("Feed '", name, "': ", t.status().message()));
  return std::optional<Tensor>(std::move(*t));
}

void ReleaseBulkFeeds(BulkServer* bulk, const proto::RunStepRequest& req) {
  if (bulk != nullptr) DropBulkFeeds(*bulk, req);
}

void EncodeFetch(BulkServer* bulk, bool client_accepts_bulk, const std::string& name, const Tensor& t,
                 proto::NamedTensor* out) {
  const uint64_t ticket = bulk != nullptr && client_accepts_bulk && IsBulkCandidate(t) ? bulk->Offer(t) : 0;
  if (ticket != 0) {
    SetBulkNamedTensor(name, t, ticket, bulk->port(), out);
  } else {
    EncodeTensor(t, out->mutable_tensor());
  }
}

int BulkPortOf(const BulkServer* bulk) { return bulk != nullptr ? bulk->port() : 0; }

}  // namespace distflow
