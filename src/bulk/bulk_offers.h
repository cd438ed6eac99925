// BulkServer's table of tensors offered to peers and bytes put by them, and
// the budget of both. Internal to bulk/: the TCP connections
// (bulk_transfer.cc) and the shared-memory ones (bulk_shm_server.cc) serve
// from it. Thread-safe (its own mutex).
#pragma once

#include <memory>
#include <random>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "base/timer.h"
#include "bulk/bulk_transfer.h"
#include "bulk/bulk_wire.h"
#include "distflow/tensor.h"

namespace distflow {

// The offered tensors; shared with expiry closures so they never outlive it.
struct BulkServer::Offers {
  struct Received {
    std::shared_ptr<TensorBuffer> buffer;
    size_t offset = 0;  // of the first byte in `buffer`
    size_t bytes = 0;
    bool local = false;  // put by PutLocal: shares the putter's memory, not budgeted
    Timer::Id timer = 0;
  };
  explicit Offers(Timer* t) : timer(t) {}
  Timer* const timer;  // expires offers and puts (Timer::Global() but in tests)
  absl::Mutex mu;
  absl::flat_hash_map<uint64_t, std::pair<Tensor, Timer::Id>> map ABSL_GUARDED_BY(mu);  // to send
  absl::flat_hash_map<uint64_t, Received> received ABSL_GUARDED_BY(mu);                 // put by peers
  uint64_t held_put_bytes ABSL_GUARDED_BY(mu) = 0;    // reserved by puts in flight and held in `received`
  uint64_t held_offer_bytes ABSL_GUARDED_BY(mu) = 0;  // of the tensors in `map`
  std::mt19937_64 gen ABSL_GUARDED_BY(mu){std::random_device{}()};

  uint64_t NewTicket() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    uint64_t ticket = 0;
    do {
      ticket = gen();
    } while (ticket == 0 || ticket == bulk_internal::kUnknownTicket || map.contains(ticket) ||
             received.contains(ticket));
    return ticket;
  }

  // Drops the ticket from whichever table holds it once `ttl` has passed.
  static Timer::Id Expire(const std::shared_ptr<Offers>& self, uint64_t ticket, absl::Duration ttl) {
    std::weak_ptr<Offers> weak = self;
    return self->timer->After(ttl, [weak, ticket] {
      if (std::shared_ptr<Offers> o = weak.lock()) {
        absl::MutexLock l(&o->mu);
        o->EraseOffer(ticket);
        o->EraseReceived(ticket);
      }
    });
  }

  // Removes an offer and releases its bytes from the budget; false if unknown.
  bool EraseOffer(uint64_t ticket, std::pair<Tensor, Timer::Id>* out = nullptr) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    auto it = map.find(ticket);
    if (it == map.end()) return false;
    held_offer_bytes -= it->second.first.TotalBytes();
    if (out != nullptr) *out = std::move(it->second);
    map.erase(it);
    return true;
  }

  // Removes a put and releases its bytes from the budget; false if unknown.
  bool EraseReceived(uint64_t ticket, Received* out = nullptr) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    auto it = received.find(ticket);
    if (it == received.end()) return false;
    if (!it->second.local) held_put_bytes -= it->second.bytes;
    if (out != nullptr) *out = std::move(it->second);
    received.erase(it);
    return true;
  }

  // Puts back an offer taken by a fetch that failed on the way (the peer
  // asks for it again over gRPC), under the same ticket.
  static void Restore(const std::shared_ptr<Offers>& self, uint64_t ticket, Tensor t, absl::Duration ttl) {
    absl::MutexLock lock(&self->mu);
    if (self->map.contains(ticket)) return;
    self->held_offer_bytes += t.TotalBytes();
    self->map.emplace(ticket, std::make_pair(std::move(t), Expire(self, ticket, ttl)));
  }

  // Reserves `n` bytes of the put budget `limit`; false if over it.
  bool Reserve(uint64_t n, uint64_t limit) {
    absl::MutexLock lock(&mu);
    if (n > limit || held_put_bytes > limit - n) return false;
    held_put_bytes += n;
    return true;
  }
  void Unreserve(uint64_t n) {
    absl::MutexLock lock(&mu);
    held_put_bytes -= n;
  }
  // Keeps the `n` reserved bytes a peer put in `buffer`; returns their ticket.
  static uint64_t Commit(const std::shared_ptr<Offers>& self, std::shared_ptr<TensorBuffer> buffer, uint64_t n,
                         absl::Duration ttl) {
    absl::MutexLock lock(&self->mu);
    const uint64_t ticket = self->NewTicket();
    self->received.emplace(ticket, Received{std::move(buffer), 0, n, /*local=*/false, Expire(self, ticket, ttl)});
    return ticket;
  }

  bool Take(uint64_t ticket, Tensor* out) {
    std::pair<Tensor, Timer::Id> offer;
    {
      absl::MutexLock lock(&mu);
      if (!EraseOffer(ticket, &offer)) return false;
    }
    timer->Cancel(offer.second);
    *out = std::move(offer.first);
    return true;
  }
};

}  // namespace distflow
