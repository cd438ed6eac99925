// What adasum.cc (the whole-tensor form and the entry point) and
// adasum_halving.cc (the vector-halving form) share; see adasum.h.
#pragma once

#include <memory>
#include <string>

#include "collective/algorithms.h"
#include "collective/transport.h"

namespace distflow {

inline int LargestPowerOfTwoAtMost(int n) {
  int p = 1;
  while (p * 2 <= n) p *= 2;
  return p;
}

// One rank's run of an Adasum all-reduce: the folding both forms share.
// With p the largest power of two not above n, rank p + i sends its tensor
// to rank i and waits for the result (Start); rank i combines
// Adasum(own, received) and then, like every rank below p, runs the form's
// rounds among ranks 0..p-1 (Rounds); at the end it sends the result back to
// rank p + i (Unfold). A state machine over the channel's callbacks, as
// algorithms.h's are; `done` is called once, and an error aborts the
// channel. Not thread-safe: one callback at a time drives a run.
class AdasumRun : public std::enable_shared_from_this<AdasumRun> {
 public:
  AdasumRun(std::shared_ptr<CollectiveChannel> ch, Tensor buf, CollectiveStatusCallback done);
  virtual ~AdasumRun() = default;

  void Start();

 protected:
  // The form's rounds among ranks 0..p-1, starting from cur_; the last
  // calls Unfold().
  virtual void Rounds() = 0;
  // Sends the result to the folded rank, if any, and finishes.
  void Unfold();
  // Sends `value` (which must not change afterwards); false after failing.
  bool Sent(int to, const std::string& tag, const Tensor& value);
  // `got` from `from` must hold `want` elements of buf_'s dtype.
  absl::Status Check(int from, const Tensor& got, int64_t want) const;
  void Finish();
  void Fail(const absl::Status& s);

  const std::shared_ptr<CollectiveChannel> ch_;
  Tensor buf_;  // the caller's: the result goes here
  Tensor cur_;  // what this rank holds now; sent only as copies or once final
  const int n_, rank_, p_;

 private:
  CollectiveStatusCallback done_;
};

// AdasumAllReduce's kVectorHalving: `buf` float32 or float64, non-empty,
// among 2 or more ranks.
void StartVectorHalvingAdasum(std::shared_ptr<CollectiveChannel> ch, Tensor buf, CollectiveStatusCallback done);

}  // namespace distflow
