#include "distflow/train/saver.h"

#include <signal.h>
#include <sys/resource.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "base/env.h"
#include "base/status_macros.h"
#include "distflow/distflow.h"
#include "distflow/train/optimizer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/checkpoint.pb.h"
#include "tensor/checkpoint_format.h"

namespace distflow {
namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;

std::string TempDir(const std::string& name) {
  std::string dir = (fs::path(::testing::TempDir()) / absl::StrCat("saver_", name, "_", ::getpid())).string();
  fs::remove_all(dir);
  return dir;
}

// A small model: weights (float [3,2]), bias (double [2]), a step (int64).
struct Model {
  Scope root = Scope::NewRootScope();
  Output w, b, step;
  explicit Model(int64_t wcols = 2, bool with_bias = true) {
    w = ops::MakeVariable(
        root.WithOpName("w"),
        ops::Const(root, Tensor::FromVector<float>(std::vector<float>(static_cast<size_t>(3 * wcols), 1.5f),
                                                   TensorShape({3, wcols}))));
    if (with_bias)
      b = ops::MakeVariable(root.WithOpName("b"), ops::Const(root, Tensor::FromVector<double>({0.25, -2})));
    step = CreateGlobalStep(root);
  }
};

std::vector<float> Floats(Session* s, const Output& o) {
  auto r = s->Run({o});
  EXPECT_TRUE(r.ok()) << r.status();
  if (!r.ok()) return {};
  auto f = (*r)[0].flat<float>();
  return {f.begin(), f.end()};
}

void Overwrite(Session* s, const Model& m) {
  std::vector<int64_t> dims;
  for (int i = 0; i < m.w.shape().rank(); ++i) dims.push_back(m.w.shape().dim(i));
  auto r = s->Run({}, {},
                  {ops::Assign(m.root, m.w, ops::Fill(m.root, dims, ops::Const(m.root, 9.0f))).op(),
                   ops::Assign(m.root, m.step, ops::Const(m.root, int64_t{77})).op()});
  ASSERT_TRUE(r.ok()) << r.status();
}

void FlipByte(const std::string& path, long offset) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  ASSERT_TRUE(f.good()) << path;
  f.seekg(offset);
  char c;
  f.read(&c, 1);
  c = static_cast<char>(c ^ 0x40);
  f.seekp(offset);
  f.write(&c, 1);
}

TEST(Saver, SavesAndRestoresEveryDtype) {
  const std::string dir = TempDir("roundtrip");
  Model m;
  auto saver = Saver::Create(m.root);
  ASSERT_TRUE(saver.ok()) << saver.status();
  Session sess;
  ASSERT_TRUE(sess.Run({}, {}, {ops::GlobalVariablesInitializer(m.root)}).ok());
  ASSERT_TRUE(sess.Run({}, {}, {ops::AssignAdd(m.root, m.step, ops::Const(m.root, int64_t{5})).op()}).ok());
  auto prefix = (*saver)->Save(&sess, dir, 5);
  ASSERT_TRUE(prefix.ok()) << prefix.status();
  EXPECT_EQ(*prefix, dir + "/model.ckpt-5");
  EXPECT_TRUE(fs::exists(dir + "/model.ckpt-5.index"));
  EXPECT_TRUE(fs::exists(dir + "/model.ckpt-5.data-00000-of-00001"));
  EXPECT_TRUE(fs::exists(dir + "/checkpoint"));

  Overwrite(&sess, m);
  EXPECT_EQ(Floats(&sess, m.w)[0], 9.0f);
  ASSERT_TRUE((*saver)->Restore(&sess, *prefix).ok());
  EXPECT_EQ(Floats(&sess, m.w), std::vector<float>(6, 1.5f));
  auto r = sess.Run({m.step, m.b});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)[0].scalar<int64_t>(), 5);
  EXPECT_EQ((*r)[1].flat<double>()[1], -2.0);
}

TEST(Saver, RestoresIntoAFreshSessionBeforeInitialisation) {
  const std::string dir = TempDir("fresh");
  {
    Model m;
    Session sess;
    ASSERT_TRUE(sess.Run({}, {}, {ops::GlobalVariablesInitializer(m.root)}).ok());
    ASSERT_TRUE((*Saver::Create(m.root))->Save(&sess, dir, 1).ok());
  }
  Model m;  // a new process would build the same graph
  Session sess;
  auto saver = Saver::Create(m.root);
  ASSERT_TRUE(saver.ok());
  auto restored = (*saver)->RestoreLatest(&sess, dir);
  ASSERT_TRUE(restored.ok()) << restored.status();
  EXPECT_EQ(Floats(&sess, m.w), std::vector<float>(6, 1.5f));
}

TEST(Saver, KeepsOnlyMaxToKeep) {
  const std::string dir = TempDir("keep");
  Model m;
  SaverOptions opts;
  opts.max_to_keep = 2;
  auto saver = Saver::Create(m.root, opts);
  ASSERT_TRUE(saver.ok());
  Session sess;
  ASSERT_TRUE(sess.Run({}, {}, {ops::GlobalVariablesInitializer(m.root)}).ok());
  for (int step : {10, 20, 30}) ASSERT_TRUE((*saver)->Save(&sess, dir, step).ok());
  EXPECT_FALSE(fs::exists(dir + "/model.ckpt-10.index"));
  EXPECT_FALSE(fs::exists(dir + "/model.ckpt-10.data-00000-of-00001"));
  EXPECT_TRUE(fs::exists(dir + "/model.ckpt-20.index"));
  auto history = CheckpointHistory(dir);
  ASSERT_TRUE(history.ok());
  EXPECT_EQ(*history, (std::vector<std::string>{dir + "/model.ckpt-20", dir + "/model.ckpt-30"}));
  // The state file holds names relative to the directory.
  std::ifstream state(dir + "/checkpoint");
  std::string text((std::istreambuf_iterator<char>(state)), std::istreambuf_iterator<char>());
  EXPECT_THAT(text, HasSubstr("model_checkpoint_path: \"model.ckpt-30\""));
  EXPECT_EQ(text.find(dir), std::string::npos) << text;
}

TEST(Saver, AMovedDirectoryStillRestores) {
  const std::string dir = TempDir("moved_from"), moved = TempDir("moved_to");
  Model m;
  auto saver = Saver::Create(m.root);
  Session sess;
  ASSERT_TRUE(sess.Run({}, {}, {ops::GlobalVariablesInitializer(m.root)}).ok());
  ASSERT_TRUE((*saver)->Save(&sess, dir, 3).ok());
  fs::rename(dir, moved);
  Overwrite(&sess, m);
  auto restored = (*saver)->RestoreLatest(&sess, moved);
  ASSERT_TRUE(restored.ok()) << restored.status();
  EXPECT_EQ(*restored, moved + "/model.ckpt-3");
  EXPECT_EQ(Floats(&sess, m.w), std::vector<float>(6, 1.5f));
}

TEST(Saver, AnotherModelIsAClearErrorListingEveryDifference) {
  const std::string dir = TempDir("other_model");
  {
    Model m;
    Session sess;
    ASSERT_TRUE(sess.Run({}, {}, {ops::GlobalVariablesInitializer(m.root)}).ok());
    ASSERT_TRUE((*Saver::Create(m.root))->Save(&sess, dir, 1).ok());
  }
  Model other(/*wcols=*/4, /*with_bias=*/false);
  auto extra = ops::MakeVariable(other.root.WithOpName("extra"), ops::Const(other.root, 1.0f));
  Session sess;
  auto saver = Saver::Create(other.root);
  ASSERT_TRUE(saver.ok());
  auto restored = (*saver)->RestoreLatest(&sess, dir);
  ASSERT_FALSE(restored.ok());
  EXPECT_EQ(restored.status().code(), absl::StatusCode::kFailedPrecondition);
  const std::string msg(restored.status().message());
  EXPECT_THAT(msg, HasSubstr("missing from the checkpoint: extra (float32[])"));
  EXPECT_THAT(msg, HasSubstr("in the checkpoint but not in the model: b (float64[2])"));
  EXPECT_THAT(msg, HasSubstr("w: the model has float32[3,4], the checkpoint float32[3,2]"));
  EXPECT_THAT(msg, HasSubstr("new log directory"));
}

TEST(Saver, ADamagedCheckpointFallsBackToThePreviousOne) {
  const std::string dir = TempDir("damaged");
  Model m;
  auto saver = Saver::Create(m.root);
  Session sess;
  ASSERT_TRUE(sess.Run({}, {}, {ops::GlobalVariablesInitializer(m.root)}).ok());
  ASSERT_TRUE((*saver)->Save(&sess, dir, 1).ok());
  Overwrite(&sess, m);
  ASSERT_TRUE((*saver)->Save(&sess, dir, 2).ok());
  // A flipped bit in a tensor of the newest checkpoint's data file.
  FlipByte(dir + "/model.ckpt-2.data-00000-of-00001", 3);
  absl::Status direct = (*saver)->Restore(&sess, dir + "/model.ckpt-2");
  EXPECT_EQ(direct.code(), absl::StatusCode::kDataLoss) << direct;
  EXPECT_THAT(std::string(direct.message()), HasSubstr("model.ckpt-2.data-00000-of-00001"));
  EXPECT_THAT(std::string(direct.message()), HasSubstr("crc32c"));
  auto restored = (*saver)->RestoreLatest(&sess, dir);
  ASSERT_TRUE(restored.ok()) << restored.status();
  EXPECT_EQ(*restored, dir + "/model.ckpt-1");
  EXPECT_EQ(Floats(&sess, m.w), std::vector<float>(6, 1.5f));

  // A truncated index: the same fallback.
  fs::resize_file(dir + "/model.ckpt-2.index", 10);
  restored = (*saver)->RestoreLatest(&sess, dir);
  ASSERT_TRUE(restored.ok()) << restored.status();
  EXPECT_EQ(*restored, dir + "/model.ckpt-1");

  // Nothing usable at all: an error, never a silent fresh start.
  fs::resize_file(dir + "/model.ckpt-1.data-00000-of-00001", 5);
  restored = (*saver)->RestoreLatest(&sess, dir);
  ASSERT_FALSE(restored.ok());
  EXPECT_EQ(restored.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(restored.status().message()), HasSubstr("model.ckpt-1"));
}

TEST(Saver, ADamagedStateFileFallsBackToIndexFiles) {
  const std::string dir = TempDir("state");
  Model m;
  auto saver = Saver::Create(m.root);
  Session sess;
  ASSERT_TRUE(sess.Run({}, {}, {ops::GlobalVariablesInitializer(m.root)}).ok());
  ASSERT_TRUE((*saver)->Save(&sess, dir, 9).ok());
  ASSERT_TRUE((*saver)->Save(&sess, dir, 10).ok());
  std::ofstream(dir + "/checkpoint") << "model_checkpoint_path: \"unterminated";
  auto latest = LatestCheckpoint(dir);
  ASSERT_TRUE(latest.ok()) << latest.status();
  EXPECT_EQ(*latest, dir + "/model.ckpt-10");  // ordered by step, not by name
}

TEST(Saver, ALogdirThatIsAFileIsAClearError) {
  const std::string file = TempDir("a_file");
  std::ofstream(file) << "not a directory";
  Model m;
  auto saver = Saver::Create(m.root);
  Session sess;
  ASSERT_TRUE(sess.Run({}, {}, {ops::GlobalVariablesInitializer(m.root)}).ok());
  auto saved = (*saver)->Save(&sess, file, 1);
  ASSERT_FALSE(saved.ok());
  EXPECT_EQ(saved.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(saved.status().message()), HasSubstr("not a directory"));
  EXPECT_EQ(LatestCheckpoint(file).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(LatestCheckpoint(file).status().message()), HasSubstr("is a file, not a directory"));
}

TEST(Saver, UninitialisedVariablesAreNamed) {
  const std::string dir = TempDir("uninit");
  Model m;
  auto saver = Saver::Create(m.root);
  Session sess;
  auto saved = (*saver)->Save(&sess, dir, 1);
  ASSERT_FALSE(saved.ok());
  EXPECT_THAT(std::string(saved.status().message()), HasSubstr("Cannot save variable"));
  EXPECT_FALSE(fs::exists(dir + "/checkpoint"));
}

// A full disk during a save: file writes beyond a size limit fail (EFBIG),
// as they would with ENOSPC. The previous checkpoint stays the latest and
// restorable, and the failed one leaves no files behind.
TEST(Saver, AFailedWriteLeavesThePreviousCheckpointValid) {
  const std::string dir = TempDir("full");
  Model m(/*wcols=*/4096);  // 48 KiB of weights
  auto saver = Saver::Create(m.root);
  Session sess;
  ASSERT_TRUE(sess.Run({}, {}, {ops::GlobalVariablesInitializer(m.root)}).ok());
  ASSERT_TRUE((*saver)->Save(&sess, dir, 1).ok());
  Overwrite(&sess, m);

  struct rlimit old;
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &old), 0);
  sighandler_t old_handler = signal(SIGXFSZ, SIG_IGN);
  struct rlimit small = old;
  small.rlim_cur = 16 * 1024;
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &small), 0);
  auto saved = (*saver)->Save(&sess, dir, 2);
  setrlimit(RLIMIT_FSIZE, &old);
  signal(SIGXFSZ, old_handler);

  ASSERT_FALSE(saved.ok());
  EXPECT_THAT(std::string(saved.status().message()), HasSubstr("previous checkpoint is still valid"));
  EXPECT_FALSE(fs::exists(dir + "/model.ckpt-2.index"));
  EXPECT_FALSE(fs::exists(dir + "/model.ckpt-2.data-00000-of-00001"));
  for (const auto& f : fs::directory_iterator(dir)) {
    EXPECT_EQ(f.path().string().find(".tmp"), std::string::npos) << f.path();
  }
  auto latest = LatestCheckpoint(dir);
  ASSERT_TRUE(latest.ok());
  EXPECT_EQ(*latest, dir + "/model.ckpt-1");
  ASSERT_TRUE((*saver)->Restore(&sess, *latest).ok());
  EXPECT_EQ(Floats(&sess, m.w)[0], 1.5f);
}

TEST(Saver, RejectsBadOptions) {
  Model m;
  SaverOptions o;
  o.max_to_keep = -1;
  EXPECT_EQ(Saver::Create(m.root, o).status().code(), absl::StatusCode::kInvalidArgument);
  o.max_to_keep = 1;
  o.basename = "a/b";
  EXPECT_EQ(Saver::Create(m.root, o).status().code(), absl::StatusCode::kInvalidArgument);
  o.basename = "ok";
  o.var_list = {ops::Const(m.root, 1.0f)};
  EXPECT_THAT(std::string(Saver::Create(m.root, o).status().message()), HasSubstr("is not a variable"));
  Scope empty = Scope::NewRootScope();
  EXPECT_FALSE(Saver::Create(empty).ok());
}

// What the Python client's repartitioned restore builds on: reading a
// checkpoint's tensors by name, and a saver over fewer variables than the
// checkpoint holds restoring them only when allowed to.
TEST(Saver, ReadsTensorsAndRestoresASubsetWhenAllowed) {
  const std::string dir = TempDir("subset");
  Model m;
  auto saver = Saver::Create(m.root);
  ASSERT_TRUE(saver.ok()) << saver.status();
  Session sess;
  ASSERT_TRUE(sess.Run({}, {}, {ops::GlobalVariablesInitializer(m.root)}).ok());
  auto prefix = (*saver)->Save(&sess, dir, 3);
  ASSERT_TRUE(prefix.ok()) << prefix.status();
  auto read = ReadCheckpointTensors(*prefix, [](const std::string& n) { return n == "w" || n == "b"; });
  ASSERT_TRUE(read.ok()) << read.status();
  ASSERT_EQ(read->size(), 2u);
  EXPECT_EQ(read->at("w").shape(), TensorShape({3, 2}));
  EXPECT_EQ(read->at("w").flat<float>()[5], 1.5f);
  EXPECT_EQ(read->at("b").flat<double>()[1], -2.0);
  EXPECT_FALSE(ReadCheckpointTensors(dir + "/nothing-here", [](const std::string&) { return true; }).ok());

  SaverOptions strict;
  strict.var_list = {m.w};
  auto only_w = Saver::Create(m.root, strict);
  ASSERT_TRUE(only_w.ok()) << only_w.status();
  absl::Status refused = (*only_w)->Restore(&sess, *prefix);
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition) << refused;
  EXPECT_THAT(std::string(refused.message()), HasSubstr("in the checkpoint but not in the model"));
  SaverOptions lenient = strict;
  lenient.allow_extra_in_checkpoint = true;
  auto lenient_w = Saver::Create(m.root, lenient);
  ASSERT_TRUE(lenient_w.ok()) << lenient_w.status();
  Overwrite(&sess, m);
  absl::Status restored = (*lenient_w)->Restore(&sess, *prefix);
  EXPECT_TRUE(restored.ok()) << restored;
  EXPECT_EQ(Floats(&sess, m.w), std::vector<float>(6, 1.5f));
}

// A [10,3] float table whose element (r, c) is r * 10 + c (or all zeros),
// as `parts` variables "emb/part_i" split along rows the way TF's
// partitioners split (the first 10 % parts one row longer), each saved as a
// slice of "emb"; parts == 0: one unpartitioned variable "emb".
struct Table {
  Scope root = Scope::NewRootScope();
  std::vector<Output> parts;
  SaverOptions options;
  Table(int num_parts, bool zeros, int64_t rows = 10) {
    const int n = std::max(num_parts, 1);
    int64_t offset = 0;
    for (int i = 0; i < n; ++i) {
      const int64_t len = rows / n + (i < rows % n ? 1 : 0);
      std::vector<float> v;
      for (int64_t r = offset; r < offset + len; ++r) {
        for (int c = 0; c < 3; ++c) v.push_back(zeros ? 0.f : static_cast<float>(r * 10 + c));
      }
      const std::string name = num_parts == 0 ? "emb" : absl::StrCat("emb/part_", i);
      Output var = ops::MakeVariable(root.WithOpName(name),
                                     ops::Const(root, Tensor::FromVector<float>(v, TensorShape({len, 3}))));
      parts.push_back(var);
      if (num_parts > 0) options.slices.push_back({var, "emb", {rows, 3}, {offset, 0}});
      offset += len;
    }
  }
  // The rows of every part, in order.
  std::vector<float> Rows(Session* s) const {
    std::vector<float> all;
    for (const Output& p : parts) {
      std::vector<float> f = Floats(s, p);
      all.insert(all.end(), f.begin(), f.end());
    }
    return all;
  }
};

std::vector<float> Expected() {
  std::vector<float> v;
  for (int r = 0; r < 10; ++r) {
    for (int c = 0; c < 3; ++c) v.push_back(static_cast<float>(r * 10 + c));
  }
  return v;
}

// Saves a Table of `parts` parts in `dir`; returns the prefix.
std::string SaveTable(const std::string& dir, int parts) {
  Table t(parts, /*zeros=*/false);
  auto saver = Saver::Create(t.root, t.options);
  EXPECT_TRUE(saver.ok()) << saver.status();
  if (!saver.ok()) return "";
  Session sess;
  EXPECT_TRUE(sess.Run({}, {}, {ops::GlobalVariablesInitializer(t.root)}).ok());
  auto prefix = (*saver)->Save(&sess, dir, 1);
  EXPECT_TRUE(prefix.ok()) << prefix.status();
  return prefix.ok() ? *prefix : "";
}

// Restores `prefix` into a zeroed Table of `parts` parts.
absl::Status RestoreTable(const std::string& prefix, int parts, std::vector<float>* rows, int64_t full_rows = 10) {
  Table t(parts, /*zeros=*/true, full_rows);
  ASSIGN_OR_RETURN(auto saver, Saver::Create(t.root, t.options));
  Session sess;
  if (auto r = sess.Run({}, {}, {ops::GlobalVariablesInitializer(t.root)}); !r.ok()) return r.status();
  RETURN_IF_ERROR(saver->Restore(&sess, prefix));
  *rows = t.Rows(&sess);
  return absl::OkStatus();
}

TEST(SaverSlices, TheIndexRecordsEachPartAsASliceOfTheFullVariable) {
  const std::string prefix = SaveTable(TempDir("slice_index"), 4);
  ASSERT_FALSE(prefix.empty());
  auto contents = Env::Default()->ReadFile(prefix + ".index");
  ASSERT_TRUE(contents.ok());
  auto index = checkpoint::ParseIndex(*contents, prefix + ".index");
  ASSERT_TRUE(index.ok()) << index.status();
  std::map<std::string, std::vector<int64_t>> offsets;
  for (const proto::CheckpointEntry& e : index->entry()) {
    ASSERT_TRUE(e.has_slice()) << e.name();
    EXPECT_EQ(e.slice().full_name(), "emb");
    EXPECT_EQ(std::vector<int64_t>(e.slice().full_shape().dim().begin(), e.slice().full_shape().dim().end()),
              (std::vector<int64_t>{10, 3}));
    offsets[e.name()] = {e.slice().offset().begin(), e.slice().offset().end()};
  }
  EXPECT_EQ(offsets["emb/part_0"], (std::vector<int64_t>{0, 0}));
  EXPECT_EQ(offsets["emb/part_1"], (std::vector<int64_t>{3, 0}));
  EXPECT_EQ(offsets["emb/part_2"], (std::vector<int64_t>{6, 0}));
  EXPECT_EQ(offsets["emb/part_3"], (std::vector<int64_t>{8, 0}));
}

TEST(SaverSlices, FourPartsRestoreIntoThreeOneAndAWholeVariableRowByRow) {
  const std::string prefix = SaveTable(TempDir("slice_4"), 4);
  ASSERT_FALSE(prefix.empty());
  for (int parts : {4, 3, 1, 0}) {
    std::vector<float> rows;
    absl::Status s = RestoreTable(prefix, parts, &rows);
    ASSERT_TRUE(s.ok()) << "into " << parts << " parts: " << s;
    EXPECT_EQ(rows, Expected()) << "into " << parts << " parts";
  }
}

TEST(SaverSlices, AWholeVariableRestoresIntoParts) {
  const std::string prefix = SaveTable(TempDir("slice_whole"), 0);
  ASSERT_FALSE(prefix.empty());
  for (int parts : {3, 2}) {
    std::vector<float> rows;
    absl::Status s = RestoreTable(prefix, parts, &rows);
    ASSERT_TRUE(s.ok()) << "into " << parts << " parts: " << s;
    EXPECT_EQ(rows, Expected()) << "into " << parts << " parts";
  }
}

TEST(SaverSlices, PartsSavedWithoutSliceInfoStillRestore) {
  // A checkpoint written before slices were recorded: the same parts, no slices.
  const std::string dir = TempDir("slice_old");
  Table old(4, /*zeros=*/false);
  auto saver = Saver::Create(old.root);
  ASSERT_TRUE(saver.ok()) << saver.status();
  Session sess;
  ASSERT_TRUE(sess.Run({}, {}, {ops::GlobalVariablesInitializer(old.root)}).ok());
  auto prefix = (*saver)->Save(&sess, dir, 1);
  ASSERT_TRUE(prefix.ok()) << prefix.status();
  std::vector<float> rows;
  absl::Status s = RestoreTable(*prefix, 4, &rows);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(rows, Expected());
}

TEST(SaverSlices, AnotherFullShapeIsAnErrorNamingTheVariableAndBothShapes) {
  const std::string prefix = SaveTable(TempDir("slice_shape"), 4);
  ASSERT_FALSE(prefix.empty());
  std::vector<float> rows;
  absl::Status s = RestoreTable(prefix, 3, &rows, /*full_rows=*/12);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("emb/part_0: a slice of 'emb' of shape [12,3] in the model"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("checkpoint's 'emb' has shape [10,3]"));
}

// Rewrites the index of `prefix` with `edit` applied to entry `name`.
void EditIndex(const std::string& prefix, const std::string& name,
               const std::function<void(proto::CheckpointEntry*)>& edit) {
  auto contents = Env::Default()->ReadFile(prefix + ".index");
  ASSERT_TRUE(contents.ok());
  auto index = checkpoint::ParseIndex(*contents, prefix + ".index");
  ASSERT_TRUE(index.ok()) << index.status();
  for (proto::CheckpointEntry& e : *index->mutable_entry()) {
    if (e.name() == name) edit(&e);
  }
  ASSERT_TRUE(Env::Default()->WriteFileAtomically(prefix + ".index", checkpoint::EncodeIndex(*index)).ok());
}

TEST(SaverSlices, DamagedSlicesAreDataLossNamingTheEntry) {
  {
    const std::string prefix = SaveTable(TempDir("slice_outside"), 4);
    EditIndex(prefix, "emb/part_1", [](proto::CheckpointEntry* e) { e->mutable_slice()->set_offset(0, 9); });
    std::vector<float> rows;
    absl::Status s = RestoreTable(prefix, 3, &rows);
    EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr("entry 'emb/part_1' is a slice [3,3] at offset 9,0"));
  }
  {
    const std::string prefix = SaveTable(TempDir("slice_overlap"), 4);
    EditIndex(prefix, "emb/part_1", [](proto::CheckpointEntry* e) { e->mutable_slice()->set_offset(0, 2); });
    std::vector<float> rows;
    absl::Status s = RestoreTable(prefix, 3, &rows);
    EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr("the slices 'emb/part_0' and 'emb/part_1' of 'emb' overlap"));
  }
  {
    const std::string prefix = SaveTable(TempDir("slice_rank"), 4);
    EditIndex(prefix, "emb/part_2", [](proto::CheckpointEntry* e) { e->mutable_slice()->add_offset(0); });
    std::vector<float> rows;
    absl::Status s = RestoreTable(prefix, 1, &rows);
    EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr("'emb/part_2'"));
  }
  {
    const std::string prefix = SaveTable(TempDir("slice_truncated"), 4);
    const std::string data = prefix + ".data-00000-of-00001";
    fs::resize_file(data, fs::file_size(data) / 2);
    std::vector<float> rows;
    absl::Status s = RestoreTable(prefix, 3, &rows);
    EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr(data));
  }
}

TEST(SaverSlices, RejectsASliceOutsideItsFullShape) {
  Table t(2, /*zeros=*/true);
  t.options.slices[1].offset = {6, 0};  // rows 6..10 of a 10-row table
  auto saver = Saver::Create(t.root, t.options);
  EXPECT_EQ(saver.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(saver.status().message()), HasSubstr("'emb/part_1'"));
  EXPECT_THAT(std::string(saver.status().message()), HasSubstr("lies outside the full shape"));
}

}  // namespace
}  // namespace distflow
