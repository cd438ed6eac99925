// The Queue resource (queue.h): order, blocking without threads, close,
// cancellation, capacity, shuffling, padding and the errors of bad tuples.
#include <optional>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/cpu/queue.h"

namespace distflow {
namespace {

using ::testing::HasSubstr;

Queue::Options Fifo(int64_t capacity = -1) {
  Queue::Options o;
  o.name = "q";
  o.dtypes = {DT_FLOAT, DT_INT32};
  o.shapes = {PartialShape({2}), PartialShape::Scalar()};
  o.capacity = capacity;
  return o;
}

Queue::Tuple Element(float x, int32_t y) { return {Tensor::FromVector(std::vector<float>{x, -x}), Tensor::Scalar(y)}; }

struct Result {
  std::optional<absl::Status> status;
  std::vector<Tensor> components;
};

Queue::DequeueDone Into(Result* r) {
  return [r](absl::Status s, std::vector<Tensor> c) {
    r->status = s;
    r->components = std::move(c);
  };
}

Queue::EnqueueDone Into(std::optional<absl::Status>* r) {
  return [r](absl::Status s) { *r = s; };
}

TEST(Queue, FifoOrderAndBatching) {
  auto q = std::make_shared<Queue>(Fifo());
  for (int i = 0; i < 3; ++i) {
    std::optional<absl::Status> done;
    q->Enqueue(q, {Element(static_cast<float>(i), i)}, nullptr, Into(&done));
    ASSERT_TRUE(done.has_value() && done->ok());
  }
  Result one;
  q->Dequeue(q, -1, false, nullptr, Into(&one));
  ASSERT_TRUE(one.status->ok());
  EXPECT_EQ(one.components[1].scalar<int32_t>(), 0);
  Result two;
  q->Dequeue(q, 2, false, nullptr, Into(&two));
  ASSERT_TRUE(two.status->ok()) << *two.status;
  EXPECT_EQ(two.components[0].shape(), TensorShape({2, 2}));
  EXPECT_EQ(two.components[0].flat<float>()[2], 2.f);
  EXPECT_EQ(two.components[0].flat<float>()[3], -2.f);
  EXPECT_EQ(two.components[1].flat<int32_t>()[0], 1);
  EXPECT_EQ(q->Size(), 0);
}

TEST(Queue, DequeueWaitsWithoutAThreadUntilEnqueue) {
  auto q = std::make_shared<Queue>(Fifo());
  Result r;
  q->Dequeue(q, 2, false, nullptr, Into(&r));
  EXPECT_FALSE(r.status.has_value());
  std::optional<absl::Status> e1, e2;
  q->Enqueue(q, {Element(1, 1)}, nullptr, Into(&e1));
  EXPECT_FALSE(r.status.has_value());  // one of two
  q->Enqueue(q, {Element(2, 2)}, nullptr, Into(&e2));
  ASSERT_TRUE(r.status.has_value() && r.status->ok());
  EXPECT_EQ(r.components[1].flat<int32_t>()[1], 2);
}

TEST(Queue, CloseEndsWaitingDequeuesWithOutOfRangeNamingTheQueue) {
  auto q = std::make_shared<Queue>(Fifo());
  std::optional<absl::Status> e;
  q->Enqueue(q, {Element(1, 1)}, nullptr, Into(&e));
  Result r, up_to;
  q->Dequeue(q, 3, false, nullptr, Into(&r));
  q->Close(false);
  ASSERT_TRUE(r.status.has_value());
  EXPECT_TRUE(absl::IsOutOfRange(*r.status)) << *r.status;
  EXPECT_THAT(std::string(r.status->message()), HasSubstr("Queue 'q' is closed"));
  EXPECT_EQ(q->Size(), 1);                        // what the failed dequeue took went back
  q->Dequeue(q, 3, true, nullptr, Into(&up_to));  // up_to takes the rest
  ASSERT_TRUE(up_to.status->ok()) << *up_to.status;
  EXPECT_EQ(up_to.components[0].dim_size(0), 1);
  std::optional<absl::Status> late;
  q->Enqueue(q, {Element(2, 2)}, nullptr, Into(&late));
  EXPECT_TRUE(absl::IsCancelled(*late));
}

TEST(Queue, CapacityParksEnqueuesAndCloseCanCancelThem) {
  auto q = std::make_shared<Queue>(Fifo(1));
  std::optional<absl::Status> a, b, c;
  q->Enqueue(q, {Element(1, 1)}, nullptr, Into(&a));
  q->Enqueue(q, {Element(2, 2)}, nullptr, Into(&b));
  EXPECT_TRUE(a.has_value());
  EXPECT_FALSE(b.has_value());
  Result r;
  q->Dequeue(q, -1, false, nullptr, Into(&r));
  EXPECT_TRUE(b.has_value() && b->ok());  // room made
  EXPECT_EQ(q->Size(), 1);
  q->Enqueue(q, {Element(3, 3)}, nullptr, Into(&c));
  EXPECT_FALSE(c.has_value());
  q->Close(/*cancel_pending_enqueues=*/true);
  ASSERT_TRUE(c.has_value());
  EXPECT_TRUE(absl::IsCancelled(*c));
}

TEST(Queue, StepCancellationEndsAWaitingDequeue) {
  auto q = std::make_shared<Queue>(Fifo());
  CancellationManager cm;
  Result r;
  q->Dequeue(q, -1, false, &cm, Into(&r));
  EXPECT_FALSE(r.status.has_value());
  cm.StartCancel(absl::AbortedError("worker 1 died"));
  ASSERT_TRUE(r.status.has_value());
  EXPECT_TRUE(absl::IsAborted(*r.status));
  // The queue still works.
  std::optional<absl::Status> e;
  q->Enqueue(q, {Element(1, 1)}, nullptr, Into(&e));
  EXPECT_EQ(q->Size(), 1);
  // A step cancelled before it asks fails at once.
  Result late;
  q->Dequeue(q, -1, false, &cm, Into(&late));
  ASSERT_TRUE(late.status.has_value());
  EXPECT_FALSE(late.status->ok());
}

TEST(Queue, RandomShuffleKeepsMinAfterDequeueUntilClosed) {
  Queue::Options o;
  o.name = "shuffle";
  o.kind = Queue::Kind::kRandomShuffle;
  o.dtypes = {DT_INT32};
  o.min_after_dequeue = 5;
  o.seed = 42;
  auto q = std::make_shared<Queue>(o);
  std::vector<Queue::Tuple> elements;
  for (int i = 0; i < 20; ++i) elements.push_back({Tensor::Scalar<int32_t>(i)});
  std::optional<absl::Status> e;
  q->Enqueue(q, elements, nullptr, Into(&e));
  Result r;
  q->Dequeue(q, 15, false, nullptr, Into(&r));
  ASSERT_TRUE(r.status->ok());
  std::vector<int32_t> got(r.components[0].flat<int32_t>().begin(), r.components[0].flat<int32_t>().end());
  std::vector<int32_t> sorted = got;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_NE(got, sorted);  // shuffled (a fixed seed: deterministic)
  EXPECT_EQ(std::unique(sorted.begin(), sorted.end()), sorted.end());
  Result blocked;
  q->Dequeue(q, -1, false, nullptr, Into(&blocked));
  EXPECT_FALSE(blocked.status.has_value());  // 5 left = min_after_dequeue
  q->Close(false);
  EXPECT_TRUE(blocked.status.has_value() && blocked.status->ok());
  EXPECT_EQ(q->Size(), 4);
}

TEST(Queue, PaddingQueueBatchesDifferentLengths) {
  Queue::Options o;
  o.name = "pad";
  o.kind = Queue::Kind::kPadding;
  o.dtypes = {DT_INT64};
  o.shapes = {PartialShape({-1})};
  auto q = std::make_shared<Queue>(o);
  std::optional<absl::Status> e;
  q->Enqueue(q, {{Tensor::FromVector(std::vector<int64_t>{1, 2, 3})}, {Tensor::FromVector(std::vector<int64_t>{4})}},
             nullptr, Into(&e));
  Result r;
  q->Dequeue(q, 2, false, nullptr, Into(&r));
  ASSERT_TRUE(r.status->ok()) << *r.status;
  EXPECT_EQ(r.components[0].shape(), TensorShape({2, 3}));
  EXPECT_EQ(std::vector<int64_t>(r.components[0].flat<int64_t>().begin(), r.components[0].flat<int64_t>().end()),
            (std::vector<int64_t>{1, 2, 3, 4, 0, 0}));
  // A FIFO queue cannot batch them.
  Queue::Options f = o;
  f.kind = Queue::Kind::kFifo;
  auto fifo = std::make_shared<Queue>(f);
  fifo->Enqueue(fifo, {{Tensor::FromVector(std::vector<int64_t>{1, 2})}, {Tensor::FromVector(std::vector<int64_t>{4})}},
                nullptr, Into(&e));
  Result bad;
  fifo->Dequeue(fifo, 2, false, nullptr, Into(&bad));
  EXPECT_THAT(std::string(bad.status->message()), HasSubstr("PaddingFIFOQueue"));
}

TEST(Queue, RejectsTuplesOfTheWrongTypeOrShape) {
  Queue q(Fifo());
  absl::Status dtype = q.ValidateTuple({Tensor::FromVector(std::vector<int32_t>{1, 2}), Tensor::Scalar(1)}, false);
  EXPECT_THAT(std::string(dtype.message()), HasSubstr("component 0 has dtype int32, the queue holds float"));
  absl::Status shape = q.ValidateTuple({Tensor::FromVector(std::vector<float>{1, 2, 3}), Tensor::Scalar(1)}, false);
  EXPECT_THAT(std::string(shape.message()), HasSubstr("component 0 has shape [3]"));
  absl::Status count = q.ValidateTuple({Tensor::Scalar(1)}, false);
  EXPECT_THAT(std::string(count.message()), HasSubstr("tuples of 2 components"));
  absl::Status many =
      q.ValidateTuple({Tensor(DT_FLOAT, TensorShape({3, 2})), Tensor(DT_INT32, TensorShape({2}))}, true);
  EXPECT_THAT(std::string(many.message()), HasSubstr("different numbers of elements"));
  EXPECT_TRUE(q.ValidateTuple({Tensor(DT_FLOAT, TensorShape({3, 2})), Tensor(DT_INT32, TensorShape({3}))}, true).ok());
  EXPECT_TRUE(q.MatchesOptions(Fifo()).ok());
  EXPECT_THAT(std::string(q.MatchesOptions(Fifo(5)).message()), HasSubstr("another shared_name"));
}

}  // namespace
}  // namespace distflow
