// Kernels of the reader ops (graph/ops/queue_ops.cc). A reader is a
// resource that reads one file at a time, taking the next file name from a
// queue of strings when a file is done. Reads of one reader are served one
// at a time in arrival order (ReaderRead runs from several queue-runner
// threads at once); waiting for a file name holds no thread.
#include <sys/stat.h>

#include <atomic>
#include <deque>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "data/record_io.h"
#include "graph/attr_value.h"
#include "kernels/cpu/queue.h"
#include "kernels/cpu/resource_handle.h"
#include "kernels/kernel_registry.h"

namespace distflow {
namespace {

// How one kind of reader reads a file.
class FileFormat {
 public:
  virtual ~FileFormat() = default;
  // Opens `path`; its records come from Next.
  virtual absl::Status Open(const std::string& path) = 0;
  // The next record, or OutOfRange at the end of the file.
  virtual absl::Status Next(std::string* value) = 0;
};

class TFRecordFormat : public FileFormat {
 public:
  explicit TFRecordFormat(record_io::Compression c) : compression_(c) {}
  absl::Status Open(const std::string& path) override {
    ASSIGN_OR_RETURN(reader_, record_io::RecordReader::Open(path, compression_));
    return absl::OkStatus();
  }
  absl::Status Next(std::string* value) override { return reader_->ReadRecord(value); }

 private:
  record_io::Compression compression_;
  std::unique_ptr<record_io::RecordReader> reader_;
};

absl::Status ReadExactly(record_io::ByteSource* src, size_t n, std::string* out, bool* short_read) {
  out->resize(n);
  size_t done = 0;
  while (done < n) {
    ASSIGN_OR_RETURN(size_t got, src->Read(out->data() + done, n - done));
    if (got == 0) break;
    done += got;
  }
  *short_read = done < n;
  out->resize(done);
  return absl::OkStatus();
}

class FixedLengthFormat : public FileFormat {
 public:
  FixedLengthFormat(int64_t header, int64_t record, int64_t footer, int64_t hop, record_io::Compression c)
      : header_(header), record_(record), footer_(footer), hop_(hop), compression_(c) {}
  absl::Status Open(const std::string& path) override {
    ASSIGN_OR_RETURN(src_, record_io::ByteSource::Open(path, compression_));
    std::string skip;
    bool short_read = false;
    RETURN_IF_ERROR(ReadExactly(src_.get(), static_cast<size_t>(header_), &skip, &short_read));
    if (short_read) {
      return absl::DataLossError(absl::StrCat("File '", path, "' is shorter than its ", header_, "-byte header"));
    }
    // Records run up to the footer: the file's size tells where it starts
    // (for a compressed file, the footer is left unread at the end).
    body_left_ = -1;
    struct stat st;
    if (compression_ == record_io::Compression::kNone && ::stat(path.c_str(), &st) == 0) {
      body_left_ = static_cast<int64_t>(st.st_size) - header_ - footer_;
    }
    first_ = true;
    return absl::OkStatus();
  }
  absl::Status Next(std::string* value) override {
    const int64_t step = first_ || hop_ == 0 ? record_ : hop_;
    if (!first_ && hop_ > 0) {
      // Overlapping records: keep the tail of the last record.
      std::string more;
      bool short_read = false;
      if (body_left_ >= 0 && body_left_ < hop_) return absl::OutOfRangeError("end of file");
      RETURN_IF_ERROR(ReadExactly(src_.get(), static_cast<size_t>(hop_), &more, &short_read));
      if (short_read) return absl::OutOfRangeError("end of file");
      if (body_left_ >= 0) body_left_ -= hop_;
      last_ = last_.substr(static_cast<size_t>(hop_)) + more;
      *value = last_;
      return absl::OkStatus();
    }
    if (body_left_ >= 0 && body_left_ < step) return absl::OutOfRangeError("end of file");
    bool short_read = false;
    RETURN_IF_ERROR(ReadExactly(src_.get(), static_cast<size_t>(step), value, &short_read));
    if (short_read) return absl::OutOfRangeError("end of file");
    if (body_left_ >= 0) body_left_ -= step;
    first_ = false;
    if (hop_ > 0) last_ = *value;
    return absl::OkStatus();
  }

 private:
  const int64_t header_, record_, footer_, hop_;
  const record_io::Compression compression_;
  std::string last_;
  std::unique_ptr<record_io::ByteSource> src_;
  int64_t body_left_ = -1;
  bool first_ = true;
};

class WholeFileFormat : public FileFormat {
 public:
  absl::Status Open(const std::string& path) override {
    ASSIGN_OR_RETURN(src_, record_io::ByteSource::Open(path, record_io::Compression::kNone));
    done_ = false;
    return absl::OkStatus();
  }
  absl::Status Next(std::string* value) override {
    if (done_) return absl::OutOfRangeError("end of file");
    value->clear();
    char buf[1 << 16];
    for (;;) {
      ASSIGN_OR_RETURN(size_t got, src_->Read(buf, sizeof(buf)));
      if (got == 0) break;
      value->append(buf, got);
    }
    done_ = true;
    return absl::OkStatus();
  }

 private:
  std::unique_ptr<record_io::ByteSource> src_;
  bool done_ = false;
};

class TextLineFormat : public FileFormat {
 public:
  explicit TextLineFormat(int64_t skip) : skip_(skip) {}
  absl::Status Open(const std::string& path) override {
    ASSIGN_OR_RETURN(src_, record_io::ByteSource::Open(path, record_io::Compression::kNone));
    buf_.clear();
    pos_ = 0;
    eof_ = false;
    std::string line;
    for (int64_t i = 0; i < skip_; ++i) {
      absl::Status s = Next(&line);
      if (absl::IsOutOfRange(s)) break;
      RETURN_IF_ERROR(s);
    }
    return absl::OkStatus();
  }
  absl::Status Next(std::string* value) override {
    for (;;) {
      size_t nl = buf_.find('\n', pos_);
      if (nl != std::string::npos) {
        value->assign(buf_, pos_, nl - pos_);
        pos_ = nl + 1;
        if (!value->empty() && value->back() == '\r') value->pop_back();
        return absl::OkStatus();
      }
      if (eof_) {
        if (pos_ >= buf_.size()) return absl::OutOfRangeError("end of file");
        value->assign(buf_, pos_, std::string::npos);
        pos_ = buf_.size();
        return absl::OkStatus();
      }
      buf_.erase(0, pos_);
      pos_ = 0;
      char chunk[1 << 16];
      ASSIGN_OR_RETURN(size_t got, src_->Read(chunk, sizeof(chunk)));
      if (got == 0) eof_ = true;
      buf_.append(chunk, got);
    }
  }

 private:
  const int64_t skip_;
  std::unique_ptr<record_io::ByteSource> src_;
  std::string buf_;
  size_t pos_ = 0;
  bool eof_ = false;
};

// A reader: its format, the file being read, and the reads waiting.
class Reader : public Resource {
 public:
  static constexpr char kTypeName[] = "Reader";
  const char* type_name() const override { return kTypeName; }
  using Done = std::function<void(absl::Status, std::string key, std::string value)>;

  Reader(std::string name, std::unique_ptr<FileFormat> format) : name_(std::move(name)), format_(std::move(format)) {}

  void Read(const std::shared_ptr<Reader>& self, std::shared_ptr<Queue> files, CancellationManager* cm, Done done) {
    {
      absl::MutexLock lock(&mu_);
      pending_.push_back({std::move(files), cm, std::move(done)});
      if (busy_) return;
      busy_ = true;
    }
    Pump(self);
  }
  int64_t records_produced() const {
    absl::MutexLock lock(&mu_);
    return produced_;
  }

 private:
  struct Pending {
    std::shared_ptr<Queue> files;
    CancellationManager* cm;
    Done done;
  };

  // Serves the waiting reads in order; only one thread pumps at a time.
  void Pump(const std::shared_ptr<Reader>& self) {
    for (;;) {
      Pending p;
      {
        absl::MutexLock lock(&mu_);
        if (pending_.empty()) {
          busy_ = false;
          return;
        }
        p = pending_.front();  // popped once served
      }
      if (!has_file_) {
        // The next file name; Pump resumes when it comes.
        p.files->Dequeue(p.files, -1, false, p.cm, [this, self](absl::Status s, std::vector<Tensor> c) {
          if (s.ok() && (c.size() != 1 || c[0].dtype() != DT_STRING || c[0].NumElements() != 1)) {
            s = absl::InvalidArgumentError(absl::StrCat("Reader '", name_, "' needs a queue of string file names"));
          }
          if (s.ok()) {
            path_ = c[0].flat<std::string>()[0];
            record_ = 0;
            s = format_->Open(path_);
            if (s.ok()) {
              has_file_ = true;
            } else {
              s = absl::Status(s.code(), absl::StrCat("Reader '", name_, "': ", s.message()));
            }
          }
          if (!s.ok()) Serve(s, "", "");
          Pump(self);
        });
        return;
      }
      std::string value;
      absl::Status s = format_->Next(&value);
      if (absl::IsOutOfRange(s)) {
        has_file_ = false;  // on to the next file
        continue;
      }
      if (!s.ok()) {
        has_file_ = false;  // a damaged file is skipped after its error
        Serve(absl::Status(s.code(), absl::StrCat("Reader '", name_, "': ", s.message())), "", "");
        continue;
      }
      Serve(absl::OkStatus(), absl::StrCat(path_, ":", record_++), std::move(value));
    }
  }
  void Serve(absl::Status s, std::string key, std::string value) {
    Pending p;
    {
      absl::MutexLock lock(&mu_);
      p = std::move(pending_.front());
      pending_.pop_front();
      if (s.ok()) ++produced_;
    }
    p.done(s, std::move(key), std::move(value));
  }

  const std::string name_;
  mutable absl::Mutex mu_;
  std::deque<Pending> pending_ ABSL_GUARDED_BY(mu_);
  bool busy_ ABSL_GUARDED_BY(mu_) = false;
  int64_t produced_ ABSL_GUARDED_BY(mu_) = 0;
  // Touched only by the pumping thread.
  std::unique_ptr<FileFormat> format_;
  bool has_file_ = false;
  std::string path_;
  int64_t record_ = 0;
};

class ReaderOp : public OpKernel {
 public:
  using Factory = std::function<absl::StatusOr<std::unique_ptr<FileFormat>>(const proto::NodeDef&)>;
  ReaderOp(OpKernelConstruction* c, Factory factory) : OpKernel(c), factory_(std::move(factory)) {}
  absl::Status Init(OpKernelConstruction* c) override {
    ASSIGN_OR_RETURN(handle_, ResourceHandleAttrs::FromNode(c->def()));
    def_ = c->def();
    return factory_(def_).status();  // checks the attributes once
  }
  absl::Status Compute(OpKernelContext* ctx) override {
    const std::string container = handle_.Container(ctx);
    // Init checked the attributes, so the factory cannot fail here.
    RETURN_IF_ERROR(ctx->resource_manager()
                        ->LookupOrCreate<Reader>(container, handle_.shared_name,
                                                 [&] {
                                                   absl::StatusOr<std::unique_ptr<FileFormat>> f = factory_(def_);
                                                   return std::make_shared<Reader>(handle_.shared_name, std::move(*f));
                                                 })
                        .status());
    ctx->set_output_ref(0, MakeHandle(container, handle_.shared_name));
    return absl::OkStatus();
  }
  bool IsExpensive() const override { return false; }

 private:
  Factory factory_;
  ResourceHandleAttrs handle_;
  proto::NodeDef def_;
};

absl::StatusOr<std::unique_ptr<FileFormat>> MakeTFRecord(const proto::NodeDef& def) {
  ASSIGN_OR_RETURN(std::string name, GetAttrString(def, "compression_type"));
  ASSIGN_OR_RETURN(record_io::Compression c, record_io::ParseCompression(name));
  return std::make_unique<TFRecordFormat>(c);
}

absl::StatusOr<std::unique_ptr<FileFormat>> MakeFixedLength(const proto::NodeDef& def) {
  ASSIGN_OR_RETURN(int64_t header, GetAttrInt(def, "header_bytes"));
  ASSIGN_OR_RETURN(int64_t record, GetAttrInt(def, "record_bytes"));
  ASSIGN_OR_RETURN(int64_t footer, GetAttrInt(def, "footer_bytes"));
  ASSIGN_OR_RETURN(int64_t hop, GetAttrInt(def, "hop_bytes"));
  ASSIGN_OR_RETURN(std::string encoding, GetAttrString(def, "encoding"));
  if (record <= 0 || header < 0 || footer < 0 || hop < 0 || hop > record) {
    return absl::InvalidArgumentError(absl::StrCat("FixedLengthRecordReader needs record_bytes > 0, header, footer ",
                                                   "and hop bytes >= 0 and hop_bytes <= record_bytes; got ", record,
                                                   ", ", header, ", ", footer, ", ", hop));
  }
  ASSIGN_OR_RETURN(record_io::Compression c, record_io::ParseCompression(encoding));
  return std::make_unique<FixedLengthFormat>(header, record, footer, hop, c);
}

// The reader (input 0) and the queue of file names (input 1) of a read op.
absl::StatusOr<std::pair<std::shared_ptr<Reader>, std::shared_ptr<Queue>>> ReaderAndQueue(OpKernelContext* ctx) {
  ASSIGN_OR_RETURN(std::shared_ptr<Reader> r, LookupByHandle<Reader>(ctx, 0));
  ASSIGN_OR_RETURN(std::shared_ptr<Queue> q, LookupByHandle<Queue>(ctx, 1));
  return std::make_pair(std::move(r), std::move(q));
}

class ReaderReadOp : public AsyncOpKernel {
 public:
  using AsyncOpKernel::AsyncOpKernel;
  void ComputeAsync(OpKernelContext* ctx, DoneCallback done) override {
    auto rq = ReaderAndQueue(ctx);
    if (!rq.ok()) return done(rq.status());
    auto& [r, q] = *rq;
    r->Read(r, q, ctx->cancellation_manager(),
            [ctx, done = std::move(done)](absl::Status s, std::string key, std::string value) {
              if (s.ok()) s = ctx->set_output(0, Tensor::Scalar<std::string>(std::move(key)));
              if (s.ok()) s = ctx->set_output(1, Tensor::Scalar<std::string>(std::move(value)));
              done(s);
            });
  }
  int64_t EstimatedWork(const std::vector<TensorShape>&) const override { return 1; }
};

// Reads one record at a time through Reader::Read until `num_records` or
// the end of the input. A read that completes inside Read() does not
// recurse: the loop in Next() takes it (the atomic `in_call` hands each
// completion either to that loop or to the callback, never both).
class ReaderReadUpToOp : public AsyncOpKernel {
 public:
  using AsyncOpKernel::AsyncOpKernel;
  void ComputeAsync(OpKernelContext* ctx, DoneCallback done) override {
    auto rq = ReaderAndQueue(ctx);
    if (!rq.ok()) return done(rq.status());
    const Tensor& n = ctx->input(2);
    if (n.dtype() != DT_INT64 || n.NumElements() != 1 || n.flat<int64_t>()[0] < 1) {
      return done(absl::InvalidArgumentError(
          absl::StrCat("ReaderReadUpTo '", name(), "': num_records must be a positive int64 scalar")));
    }
    auto st = std::make_shared<State>();
    st->reader = std::move(rq->first);
    st->queue = std::move(rq->second);
    st->ctx = ctx;
    st->want = n.flat<int64_t>()[0];
    st->done = std::move(done);
    Next(st);
  }
  int64_t EstimatedWork(const std::vector<TensorShape>&) const override { return 1; }

 private:
  struct State {
    std::shared_ptr<Reader> reader;
    std::shared_ptr<Queue> queue;
    OpKernelContext* ctx = nullptr;
    int64_t want = 0;
    DoneCallback done;
    std::vector<std::string> keys, values;
    bool finished = false;
    absl::Status status;
    std::atomic<bool> in_call{false};

    void Record(absl::Status s, std::string key, std::string value) {
      if (s.ok()) {
        keys.push_back(std::move(key));
        values.push_back(std::move(value));
        finished = static_cast<int64_t>(keys.size()) >= want;
      } else {
        finished = true;
        // The end of the input after some records: they are the answer.
        if (!(absl::IsOutOfRange(s) && !keys.empty())) status = std::move(s);
      }
    }
  };

  static void Next(const std::shared_ptr<State>& st) {
    while (true) {
      if (st->finished) return Finish(st);
      st->in_call.store(true);
      st->reader->Read(st->reader, st->queue, st->ctx->cancellation_manager(),
                       [st](absl::Status s, std::string key, std::string value) {
                         st->Record(std::move(s), std::move(key), std::move(value));
                         if (st->in_call.exchange(false)) return;  // Next's loop goes on
                         Next(st);
                       });
      if (st->in_call.exchange(false)) return;  // the callback goes on
    }
  }

  static void Finish(const std::shared_ptr<State>& st) {
    absl::Status s = st->status;
    if (s.ok()) {
      const int64_t n = static_cast<int64_t>(st->keys.size());
      Tensor keys(DT_STRING, TensorShape({n})), values(DT_STRING, TensorShape({n}));
      for (int64_t i = 0; i < n; ++i) {
        keys.flat<std::string>()[static_cast<size_t>(i)] = std::move(st->keys[static_cast<size_t>(i)]);
        values.flat<std::string>()[static_cast<size_t>(i)] = std::move(st->values[static_cast<size_t>(i)]);
      }
      s = st->ctx->set_output(0, std::move(keys));
      if (s.ok()) s = st->ctx->set_output(1, std::move(values));
    }
    DoneCallback done = std::move(st->done);
    done(s);
  }
};

class ReaderNumRecordsProducedOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext* ctx) override {
    ASSIGN_OR_RETURN(std::shared_ptr<Reader> r, LookupByHandle<Reader>(ctx, 0));
    return ctx->set_output(0, Tensor::Scalar<int64_t>(r->records_produced()));
  }
};

template <int kKind>
class ReaderOpOf : public ReaderOp {
 public:
  explicit ReaderOpOf(OpKernelConstruction* c) : ReaderOp(c, Make) {}

 private:
  static absl::StatusOr<std::unique_ptr<FileFormat>> Make(const proto::NodeDef& def) {
    if constexpr (kKind == 0) return MakeTFRecord(def);
    if constexpr (kKind == 1) return MakeFixedLength(def);
    if constexpr (kKind == 2) return std::unique_ptr<FileFormat>(std::make_unique<WholeFileFormat>());
    if constexpr (kKind == 3) {
      ASSIGN_OR_RETURN(int64_t skip, GetAttrInt(def, "skip_header_lines"));
      return std::unique_ptr<FileFormat>(std::make_unique<TextLineFormat>(skip));
    }
  }
};

}  // namespace

void RegisterReaderKernels(KernelRegistry* r) {
  r->Register<ReaderOpOf<0>>("TFRecordReader", kCpu, DT_INVALID);
  r->Register<ReaderOpOf<1>>("FixedLengthRecordReader", kCpu, DT_INVALID);
  r->Register<ReaderOpOf<2>>("WholeFileReader", kCpu, DT_INVALID);
  r->Register<ReaderOpOf<3>>("TextLineReader", kCpu, DT_INVALID);
  r->Register<ReaderReadOp>("ReaderRead", kCpu, DT_INVALID);
  r->Register<ReaderReadUpToOp>("ReaderReadUpTo", kCpu, DT_INVALID);
  r->Register<ReaderNumRecordsProducedOp>("ReaderNumRecordsProduced", kCpu, DT_INVALID);
}

}  // namespace distflow
