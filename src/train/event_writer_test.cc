#include "distflow/train/event_writer.h"

#include <unistd.h>

#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/env.h"
#include "base/fake_clock_env.h"
#include "distflow/ops.h"
#include "gtest/gtest.h"
#include "proto/event.pb.h"
#include "proto/graph.pb.h"
#include "tensor/checkpoint_format.h"
#include "train/event_file_testutil.h"

namespace distflow {
namespace {

std::string TempDir(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  std::string dir = absl::StrCat(tmp ? tmp : "/tmp", "/event_writer_test_", name, "_", getpid());
  return dir;
}

using test::ReadEvents;

TEST(EventWriter, WritesFileVersionSummariesGraphAndRunMetadata) {
  const std::string dir = TempDir("basic") + "/nested/logs";
  EventWriterOptions options;
  options.filename_suffix = ".v2";
  absl::StatusOr<std::unique_ptr<EventWriter>> w = EventWriter::Open(dir, options);
  ASSERT_TRUE(w.ok()) << w.status();
  EventWriter& writer = **w;
  EXPECT_EQ(writer.logdir(), dir);
  EXPECT_NE(writer.path().find(dir + "/events.out.tfevents."), std::string::npos);
  EXPECT_EQ(writer.path().substr(writer.path().size() - 3), ".v2");

  tensorboard::Summary s;
  s.add_value()->set_tag("loss");
  s.mutable_value(0)->set_simple_value(0.5f);
  ASSERT_TRUE(writer.WriteSummary(7, s.SerializeAsString(), 1234.5).ok());
  ASSERT_TRUE(writer.WriteScalar(8, "global_step/sec", 31.25f).ok());
  Scope root = Scope::NewRootScope();
  ops::Const(root.WithOpName("c"), 1.0f);
  ASSERT_TRUE(writer.WriteGraph(root).ok());
  ASSERT_TRUE(writer.WriteRunMetadata(9, "step9", "trace-bytes").ok());
  tensorboard::Event raw;
  raw.set_step(10);
  raw.mutable_log_message()->set_message("hello");
  ASSERT_TRUE(writer.WriteEvent(raw.SerializeAsString()).ok());
  EXPECT_FALSE(writer.WriteEvent("\xff\xff").ok());
  EXPECT_FALSE(writer.WriteSummary(1, "\xff\xff").ok());
  ASSERT_TRUE(writer.Close().ok());
  EXPECT_TRUE(writer.Close().ok());
  EXPECT_EQ(writer.WriteScalar(1, "x", 1).code(), absl::StatusCode::kFailedPrecondition);

  std::vector<tensorboard::Event> events = ReadEvents(writer.path());
  ASSERT_EQ(events.size(), 6u);
  EXPECT_EQ(events[0].file_version(), "brain.Event:2");
  EXPECT_GT(events[0].wall_time(), 1.6e9);
  EXPECT_EQ(events[1].step(), 7);
  EXPECT_EQ(events[1].wall_time(), 1234.5);
  EXPECT_EQ(events[1].summary().value(0).tag(), "loss");
  EXPECT_EQ(events[1].summary().value(0).simple_value(), 0.5f);
  EXPECT_EQ(events[2].step(), 8);
  EXPECT_EQ(events[2].summary().value(0).tag(), "global_step/sec");
  EXPECT_EQ(events[2].summary().value(0).simple_value(), 31.25f);
  proto::GraphDef graph;
  ASSERT_TRUE(graph.ParseFromString(events[3].graph_def()));
  ASSERT_EQ(graph.node_size(), 1);
  EXPECT_EQ(graph.node(0).name(), "c");
  EXPECT_EQ(events[4].tagged_run_metadata().tag(), "step9");
  EXPECT_EQ(events[4].tagged_run_metadata().run_metadata(), "trace-bytes");
  EXPECT_EQ(events[5].log_message().message(), "hello");
}

TEST(EventWriter, TwoWritersInOneSecondGetTwoFiles) {
  const std::string dir = TempDir("two");
  auto a = EventWriter::Open(dir);
  auto b = EventWriter::Open(dir);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE((*a)->path(), (*b)->path());
}

TEST(EventWriter, FlushesAfterMaxQueueRecords) {
  const std::string dir = TempDir("queue");
  EventWriterOptions options;
  options.max_queue = 2;
  options.flush_every = absl::Hours(1);
  auto w = EventWriter::Open(dir, options);
  ASSERT_TRUE(w.ok());
  ASSERT_TRUE((*w)->WriteScalar(1, "a", 1).ok());
  EXPECT_EQ(ReadEvents((*w)->path()).size(), 1u);  // buffered
  ASSERT_TRUE((*w)->WriteScalar(2, "a", 2).ok());
  EXPECT_EQ(ReadEvents((*w)->path()).size(), 3u);
  ASSERT_TRUE((*w)->WriteScalar(3, "a", 3).ok());
  ASSERT_TRUE((*w)->Flush().ok());
  EXPECT_EQ(ReadEvents((*w)->path()).size(), 4u);
}

TEST(EventWriter, FlushesOnceFlushEveryHasPassedOnItsClockAndStampsEventsWithIt) {
  FakeClockEnv clock;
  EventWriterOptions options;
  options.max_queue = 100;
  options.flush_every = absl::Seconds(120);
  options.env = &clock;
  auto w = EventWriter::Open(TempDir("clock"), options);
  ASSERT_TRUE(w.ok()) << w.status();
  ASSERT_TRUE((*w)->WriteScalar(1, "a", 1).ok());
  clock.Advance(absl::Seconds(119));
  ASSERT_TRUE((*w)->WriteScalar(2, "a", 2).ok());
  EXPECT_EQ(ReadEvents((*w)->path()).size(), 1u) << "119 s on the writer's clock: still buffered";
  clock.Advance(absl::Seconds(1));
  ASSERT_TRUE((*w)->WriteScalar(3, "a", 3).ok());
  std::vector<tensorboard::Event> events = ReadEvents((*w)->path());
  ASSERT_EQ(events.size(), 4u) << "120 s: the write flushed all three";
  const double start = absl::ToDoubleSeconds(absl::FromUnixMicros(1'000'000'000) - absl::UnixEpoch());
  EXPECT_EQ(events[0].wall_time(), start);
  EXPECT_EQ(events[1].wall_time(), start);
  EXPECT_EQ(events[2].wall_time(), start + 119);
  EXPECT_EQ(events[3].wall_time(), start + 120);
  EXPECT_NE((*w)->path().find("/events.out.tfevents.1000."), std::string::npos) << (*w)->path();
}

TEST(EventWriter, ConcurrentWritersKeepRecordsWhole) {
  const std::string dir = TempDir("threads");
  auto w = EventWriter::Open(dir);
  ASSERT_TRUE(w.ok());
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 50; ++i) EXPECT_TRUE((*w)->WriteScalar(i, absl::StrCat("t", t), i).ok());
    });
  }
  for (std::thread& t : threads) t.join();
  ASSERT_TRUE((*w)->Close().ok());
  EXPECT_EQ(ReadEvents((*w)->path()).size(), 201u);
}

TEST(EventWriter, RejectsALogDirectoryThatIsAFile) {
  const std::string dir = TempDir("file");
  ASSERT_TRUE(Env::Default()->CreateDir(dir).ok());
  const std::string file = dir + "/not_a_dir";
  const absl::string_view piece = "x";
  ASSERT_TRUE(Env::Default()->WriteFileAtomically(file, absl::MakeConstSpan(&piece, 1)).ok());
  auto w = EventWriter::Open(file);
  ASSERT_FALSE(w.ok());
  EXPECT_NE(std::string(w.status().message()).find("'" + file + "'"), std::string::npos) << w.status();
  EXPECT_NE(std::string(w.status().message()).find("not a directory"), std::string::npos) << w.status();
  auto under = EventWriter::Open(file + "/sub");
  ASSERT_FALSE(under.ok());
  EXPECT_NE(std::string(under.status().message()).find(file + "/sub"), std::string::npos) << under.status();
}

TEST(EventWriter, MaskedCrcMatchesTheFormula) {
  uint32_t c = checkpoint::Crc32c("abc");
  EXPECT_EQ(MaskedCrc32c("abc"), ((c >> 15) | (c << 17)) + 0xa282ead8u);
  // CRC-32C check value ("123456789" -> 0xe3069283).
  EXPECT_EQ(checkpoint::Crc32c("123456789"), 0xe3069283u);
}

}  // namespace
}  // namespace distflow
