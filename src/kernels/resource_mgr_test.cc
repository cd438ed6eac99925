#include "kernels/resource_mgr.h"

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
