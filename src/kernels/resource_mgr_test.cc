#include "kernels/resource_mgr.h"

#include <vector>

#include "gtest/gtest.h"

namespace distflow {
namespace {

TEST(ResourceMgr, SameKeyGivesSameVar) {
  ResourceMgr rm;
  auto a = rm.LookupOrCreateVar("c", "w", DT_FLOAT, PartialShape({2}));
  auto b = rm.LookupOrCreateVar("c", "w", DT_FLOAT, PartialShape({-1}));
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->get(), b->get());
  auto other = rm.LookupOrCreateVar("d", "w", DT_FLOAT, PartialShape({2}));
  EXPECT_NE(other->get(), a->get());
  EXPECT_EQ(rm.NumVars(), 2u);
}

TEST(Var, NeverKeepsOrWritesBorrowedMemory) {
  std::vector<float> caller = {1, 2, 3};
  bool released = false;
  Var v("w", DT_FLOAT, PartialShape({3}));
  {
    auto lent = TensorBuffer::Borrow(caller.data(), caller.size() * sizeof(float), [&] { released = true; });
    EXPECT_TRUE(lent->borrowed());
    absl::MutexLock lock(v.mu());
    v.Set(Tensor::FromBuffer(DT_FLOAT, TensorShape({3}), lent, 0).value());
    EXPECT_NE(v.value().raw_data(), caller.data()) << "Set copies borrowed memory";
  }
  EXPECT_TRUE(released) << "the variable keeps no reference to the caller's memory";
  {
    absl::MutexLock lock(v.mu());
    Tensor* value = v.MutableValue().value();
    value->flat<float>()[0] = 10;
  }
  EXPECT_EQ(caller[0], 1.0f);
  EXPECT_EQ(v.Read().value().flat<float>()[0], 10.0f);
  // Owned memory is still shared, not copied.
  Tensor owned = Tensor::FromVector<float>({4, 5, 6});
  absl::MutexLock lock(v.mu());
  v.Set(owned);
  EXPECT_TRUE(v.value().SharesBufferWith(owned));
}

TEST(ResourceMgr, ConflictingDtypeOrShapeIsAnError) {
  ResourceMgr rm;
  ASSERT_TRUE(rm.LookupOrCreateVar("", "w", DT_FLOAT, PartialShape({2})).ok());
  auto bad = rm.LookupOrCreateVar("", "w", DT_INT32, PartialShape({2}));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("already exists as float32 [2]"), std::string::npos) << bad.status();
  EXPECT_FALSE(rm.LookupOrCreateVar("", "w", DT_FLOAT, PartialShape({3})).ok());
}

TEST(ResourceMgr, CleanupDropsContainer) {
  ResourceMgr rm;
  ASSERT_TRUE(rm.LookupOrCreateVar("a", "w", DT_FLOAT, PartialShape({})).ok());
  ASSERT_TRUE(rm.LookupOrCreateVar("b", "w", DT_FLOAT, PartialShape({})).ok());
  rm.Cleanup("a");
  EXPECT_FALSE(rm.LookupVar("a", "w").ok());
  EXPECT_TRUE(rm.LookupVar("b", "w").ok());
}

TEST(Var, ReadUninitializedNamesVariable) {
  Var v("weights_1", DT_FLOAT, PartialShape({2}));
  auto r = v.Read();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(r.status().message().find("'weights_1'"), std::string::npos);
}

TEST(Var, UpdateCopiesWhenASnapshotIsAlive) {
  Var v("w", DT_FLOAT, PartialShape({2}));
  {
    absl::MutexLock l(v.mu());
    v.Set(Tensor::FromVector<float>({1, 2}));
  }
  Tensor snapshot = *v.Read();
  {
    absl::MutexLock l(v.mu());
    Tensor* t = *v.MutableValue();
    t->flat<float>()[0] = 100;
  }
  EXPECT_EQ(snapshot.flat<float>()[0], 1.f) << "a snapshot never changes under its reader";
  EXPECT_EQ(v.Read()->flat<float>()[0], 100.f);
}

}  // namespace
}  // namespace distflow
