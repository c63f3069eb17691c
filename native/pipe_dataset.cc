// SmtrainPipeDataset: a tf.data source that reads one rank's Pipe-mode FIFOs (`<prefix>_<epoch>`)
// directly, framing TFRecord (CRCs checked), RecordIO (multi-part records joined) or text lines.
//
// It does what smtrain.data.record_reader.RecordSplitter and smtrain.pipes do in Python, with the same
// semantics and error texts (the Python path is the fallback where this library is not built; the
// same tests run against both). Built by scripts/build-native.sh against the installed TensorFlow;
// loaded by smtrain/data/native.py.
//
// Why a native op: a Python generator hands tf.data one record (or one batch) at a time through the
// GIL, and spooling to files for TFRecordDataset copies every byte twice more; reading the FIFO here
// makes Pipe mode as fast as TFRecordDataset on a cached file (benchmarks/bench_pipes.py).
#include <fcntl.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "tensorflow/core/framework/common_shape_fns.h"
#include "tensorflow/core/framework/dataset.h"
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/shape_inference.h"
#include "xla/tsl/lib/hash/crc32c.h"

#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

namespace smtrain {
namespace {

using ::tensorflow::data::DatasetBase;
using ::tensorflow::data::DatasetContext;
using ::tensorflow::data::DatasetIterator;
using ::tensorflow::data::DatasetOpKernel;
using ::tensorflow::DataTypeVector;
using ::tensorflow::DT_STRING;
using ::tensorflow::data::IteratorBase;
using ::tensorflow::data::IteratorContext;
using ::tensorflow::data::IteratorStateReader;
using ::tensorflow::data::IteratorStateWriter;
using ::tensorflow::Node;
using ::tensorflow::OpKernelConstruction;
using ::tensorflow::OpKernelContext;
using ::tensorflow::PartialTensorShape;
using ::tensorflow::data::SerializationContext;
using ::tensorflow::Status;
using ::tensorflow::Tensor;
using ::tensorflow::TensorShape;
using ::tensorflow::tstring;
namespace errors = ::tensorflow::errors;

enum class Format { kTFRecord, kRecordIO, kLines };

constexpr size_t kChunk = 1 << 20;  // bytes per read, as the Python reader
constexpr uint32_t kRecordIOMagic = 0xced7230a;
constexpr uint32_t kLengthMask = (1u << 29) - 1;
constexpr char kMagicBytes[4] = {'\x0a', '\x23', '\xd7', '\xce'};  // kRecordIOMagic, little-endian

uint32_t Load32(const char* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

uint64_t Load64(const char* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

// CRC32C with the CPU's instruction where there is one. TensorFlow's own (tsl::crc32c, absl's) runs
// the portable table-driven code in the pip wheels: measured with perf, 16 % of the batched reader's
// time for 100-byte records. One 8-byte step per instruction is far faster than the pipe.
#if defined(__x86_64__)
__attribute__((target("sse4.2"))) uint32_t Crc32cSse42(const char* p, size_t n) {
  uint64_t crc = 0xffffffffu;
  for (; n >= 8; p += 8, n -= 8) crc = _mm_crc32_u64(crc, Load64(p));
  uint32_t c = static_cast<uint32_t>(crc);
  for (; n > 0; ++p, --n) c = _mm_crc32_u8(c, static_cast<uint8_t>(*p));
  return ~c;
}

const bool kHaveSse42 = __builtin_cpu_supports("sse4.2");
#endif

uint32_t Crc32c(const char* data, size_t n) {
#if defined(__x86_64__)
  if (kHaveSse42) return Crc32cSse42(data, n);
#endif
  return tsl::crc32c::Value(data, n);
}

uint32_t MaskedCrc(const char* data, size_t n) { return tsl::crc32c::Mask(Crc32c(data, n)); }

std::string Hex32(uint32_t v) {
  char text[16];
  std::snprintf(text, sizeof(text), "0x%08x", v);
  return text;
}

// A corrupt stream: the reason and the stream offset, worded as smtrain.data.record_reader.CorruptRecord.
Status Corrupt(const std::string& reason, uint64_t offset) {
  return errors::DataLoss(reason, " at byte offset ", offset);
}

// Signs of life for train's stall watchdog: the second record of $SM_PROGRESS_FILE (smtrain.progress),
// whose beats count grows by one per read of the FIFO. Outside a job of train it does nothing.
class Progress {
 public:
  static void Alive() {
    static Progress* progress = new Progress();
    if (progress->beats_ != nullptr) progress->beats_->fetch_add(1, std::memory_order_relaxed);
  }

 private:
  static constexpr size_t kRecordSize = 24;  // <QQd>: steps, beats, time
  Progress() {
    const char* path = std::getenv("SM_PROGRESS_FILE");
    if (path == nullptr || *path == '\0') return;
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0) return;
    struct stat st;
    if (fstat(fd, &st) == 0 && st.st_size >= static_cast<off_t>(2 * kRecordSize)) {
      void* map = mmap(nullptr, 2 * kRecordSize, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
      if (map != MAP_FAILED) {
        beats_ = reinterpret_cast<std::atomic<uint64_t>*>(static_cast<char*>(map) + kRecordSize + 8);
      }
    }
    close(fd);
  }
  std::atomic<uint64_t>* beats_ = nullptr;
};

// Splits a byte stream into records: the buffer grows only to the largest record.
class Framer {
 public:
  Framer(Format format, int64_t skip, int64_t skip_corrupt)
      : format_(format), to_skip_(skip), skip_corrupt_(skip_corrupt), buffer_(kChunk) {}

  // Reads once from a non-blocking fd into the buffer: bytes read, 0 at the end, -1 with EAGAIN.
  ssize_t Fill(int fd) {
    MakeRoom();
    wanted_ = 0;  // the record being assembled says again what it needs
    ssize_t n;
    do {
      n = read(fd, buffer_.data() + end_, buffer_.size() - end_);
    } while (n < 0 && errno == EINTR);
    if (n > 0) end_ += n;
    return n;
  }

  // The next whole record into `out` (got = true), or got = false when more bytes are needed.
  Status Next(tstring* out, bool* got) {
    *got = false;
    while (to_skip_ > 0) {
      bool skipped = false;
      TF_RETURN_IF_ERROR(Take(nullptr, &skipped));
      if (!skipped) return absl::OkStatus();
      --to_skip_;
    }
    return Take(out, got);
  }

  // At the end of the stream: a last line without a newline is a record; bytes left over in the
  // framed formats are a truncated record.
  Status Finish(tstring* out, bool* got) {
    *got = false;
    if (to_skip_ > 0) {
      return errors::FailedPrecondition("the epoch ended ", to_skip_, " records before the position to resume from");
    }
    const size_t left = end_ - start_;
    if (format_ == Format::kLines) {
      if (left > 0) {
        out->assign(buffer_.data() + start_, left);
        start_ = end_;
        *got = true;
      }
      return absl::OkStatus();
    }
    if (left > 0 || has_parts_) {
      return Corrupt("truncated record (" + std::to_string(left) + " bytes at the end)", offset_ + start_);
    }
    return absl::OkStatus();
  }

 private:
  // One record: copied into `out`, or dropped unchecked when `out` is null (skipping to resume).
  Status Take(tstring* out, bool* got) {
    switch (format_) {
      case Format::kTFRecord:
        return TakeTFRecord(out, got);
      case Format::kRecordIO:
        return TakeRecordIO(out, got);
      case Format::kLines:
        return TakeLine(out, got);
    }
    return absl::OkStatus();
  }

  Status TakeTFRecord(tstring* out, bool* got) {
    while (end_ - start_ >= 12) {
      const char* p = buffer_.data() + start_;
      const uint64_t length = Load64(p);
      if (out != nullptr && MaskedCrc(p, 8) != Load32(p + 8)) {
        return Corrupt("TFRecord length CRC mismatch", offset_ + start_);
      }
      const uint64_t size = 16 + length;
      if (end_ - start_ < size) {
        wanted_ = size;
        return absl::OkStatus();
      }
      if (out != nullptr && MaskedCrc(p + 12, length) != Load32(p + 12 + length)) {
        if (skipped_corrupt_ < skip_corrupt_) {  // skip this record, take the next
          ++skipped_corrupt_;
          start_ += size;
          continue;
        }
        return Corrupt("TFRecord data CRC mismatch", offset_ + start_);
      }
      if (out != nullptr) out->assign(p + 12, length);
      start_ += size;
      *got = true;
      return absl::OkStatus();
    }
    return absl::OkStatus();
  }

  Status TakeRecordIO(tstring* out, bool* got) {
    while (end_ - start_ >= 8) {
      const char* p = buffer_.data() + start_;
      const uint32_t magic = Load32(p);
      if (magic != kRecordIOMagic) {
        return Corrupt("RecordIO magic expected, found " + Hex32(magic), offset_ + start_);
      }
      const uint32_t word = Load32(p + 4);
      const uint32_t flag = word >> 29;
      const uint64_t length = word & kLengthMask;
      const uint64_t size = 8 + length + ((4 - length % 4) % 4);
      if (end_ - start_ < size) {
        wanted_ = size;
        return absl::OkStatus();
      }
      start_ += size;
      if (flag == 1 || flag == 2) {  // a part of a record that held the magic: join them
        if (out != nullptr) {
          if (has_parts_) parts_.append(kMagicBytes, 4);
          parts_.append(p + 8, length);
        }
        has_parts_ = true;
        continue;
      }
      if (out != nullptr) {
        if (flag == 3 && has_parts_) {
          parts_.append(kMagicBytes, 4);
          parts_.append(p + 8, length);
          out->assign(parts_.data(), parts_.size());
        } else {
          out->assign(p + 8, length);
        }
      }
      if (flag == 3) {
        parts_.clear();
        has_parts_ = false;
      }
      *got = true;
      return absl::OkStatus();
    }
    return absl::OkStatus();
  }

  Status TakeLine(tstring* out, bool* got) {
    const char* base = buffer_.data();
    const void* newline = std::memchr(base + scan_, '\n', end_ - scan_);
    if (newline == nullptr) {
      scan_ = end_;
      return absl::OkStatus();
    }
    const size_t stop = static_cast<const char*>(newline) - base;
    if (out != nullptr) out->assign(base + start_, stop - start_);
    start_ = scan_ = stop + 1;
    *got = true;
    return absl::OkStatus();
  }

  // Room for a read of a chunk, or for the whole record being assembled: move what is left to the
  // front, or grow.
  void MakeRoom() {
    const size_t live = end_ - start_;
    const size_t need = std::max(live + kChunk / 4, static_cast<size_t>(wanted_));
    if (buffer_.size() - end_ >= kChunk / 4 && buffer_.size() - start_ >= need) return;
    if (need > buffer_.size()) {
      std::vector<char> grown(std::max(2 * buffer_.size(), need));
      std::memcpy(grown.data(), buffer_.data() + start_, live);
      buffer_.swap(grown);
    } else {
      std::memmove(buffer_.data(), buffer_.data() + start_, live);
    }
    offset_ += start_;
    scan_ -= start_;
    end_ = live;
    start_ = 0;
  }

  const Format format_;
  int64_t to_skip_;
  const int64_t skip_corrupt_;
  int64_t skipped_corrupt_ = 0;
  std::vector<char> buffer_;
  size_t start_ = 0;     // first byte not yet taken
  size_t end_ = 0;       // end of the bytes read
  size_t scan_ = 0;      // lines: where the search for the next newline goes on
  uint64_t wanted_ = 0;  // the size of the record being assembled
  uint64_t offset_ = 0;  // stream offset of buffer_[0]
  std::string parts_;    // RecordIO: the parts of a record so far, joined by the magic
  bool has_parts_ = false;
};

std::string FormatSeconds(float seconds) {
  char text[32];
  std::snprintf(text, sizeof(text), "%g", seconds);
  return text;
}

bool Cancelled(IteratorContext* ctx) {
  return ctx->cancellation_manager() != nullptr && ctx->cancellation_manager()->IsCancelled();
}

// Opens a FIFO for reading once it exists and its writer has connected, as smtrain.pipes.open_fifo.
Status OpenFifo(IteratorContext* ctx, const std::string& path, float timeout_s, int* fd_out) {
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + std::chrono::duration<double>(timeout_s);
  auto delay = std::chrono::milliseconds(5);
  struct stat st;
  while (stat(path.c_str(), &st) != 0) {
    if (Clock::now() >= deadline) {
      return errors::DeadlineExceeded(path, ": no such FIFO after ", FormatSeconds(timeout_s),
                                      " s (is the channel in Pipe mode, and fed?)");
    }
    if (Cancelled(ctx)) return errors::Cancelled(path, ": reading was cancelled");
    std::this_thread::sleep_for(delay);
    delay = std::min(delay * 2, std::chrono::milliseconds(200));
  }
  const int fd = open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return errors::Unavailable(path, ": cannot open: ", std::strerror(errno));
  // Linux reports neither POLLIN nor POLLHUP until a writer has connected: data or an empty epoch.
  while (true) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) {
      close(fd);
      return errors::DeadlineExceeded(path, ": nobody wrote to the FIFO within ", FormatSeconds(timeout_s), " s");
    }
    struct pollfd poller = {fd, POLLIN | POLLHUP, 0};
    const int ready = poll(&poller, 1, static_cast<int>(std::min<int64_t>(left, 200)));
    if (ready > 0) break;
    if (Cancelled(ctx)) {
      close(fd);
      return errors::Cancelled(path, ": reading was cancelled");
    }
  }
#ifdef F_SETPIPE_SZ
  fcntl(fd, F_SETPIPE_SZ, static_cast<int>(kChunk));  // fewer, larger reads where the limit allows
#endif
  *fd_out = fd;
  return absl::OkStatus();
}

class PipeDataset : public DatasetBase {
 public:
  PipeDataset(OpKernelContext* ctx, std::string prefix, std::string channel, std::vector<int64_t> epochs,
              int64_t skip, int64_t skip_corrupt, float timeout_s, int64_t batch_size, bool drop_remainder,
              std::string format_name, Format format)
      : DatasetBase(DatasetContext(ctx)),
        prefix_(std::move(prefix)),
        channel_(std::move(channel)),
        epochs_(std::move(epochs)),
        skip_(skip),
        skip_corrupt_(skip_corrupt),
        timeout_s_(timeout_s),
        batch_size_(batch_size),
        drop_remainder_(drop_remainder),
        format_name_(std::move(format_name)),
        format_(format),
        // A record is a scalar string; a batch a vector of them (of batch_size exactly with drop_remainder).
        shapes_({batch_size == 0 ? PartialTensorShape({})
                                 : PartialTensorShape({drop_remainder ? batch_size : int64_t{-1}})}) {}

  std::unique_ptr<IteratorBase> MakeIteratorInternal(const std::string& prefix) const override {
    return std::make_unique<Iterator>(Iterator::Params{this, prefix + "::SmtrainPipe"});
  }

  const DataTypeVector& output_dtypes() const override {
    static DataTypeVector* dtypes = new DataTypeVector({DT_STRING});
    return *dtypes;
  }

  const std::vector<PartialTensorShape>& output_shapes() const override { return shapes_; }

  std::string DebugString() const override { return "SmtrainPipeDatasetOp::Dataset(" + prefix_ + ")"; }

  Status InputDatasets(std::vector<const DatasetBase*>*) const override { return absl::OkStatus(); }

  Status CheckExternalState() const override {
    return errors::FailedPrecondition("a Pipe-mode dataset reads FIFOs, which a saved state cannot rewind");
  }

 protected:
  Status AsGraphDefInternal(SerializationContext*, DatasetGraphDefBuilder* b, Node** output) const override {
    Node *prefix, *channel, *epochs, *skip, *skip_corrupt, *timeout, *batch_size, *drop_remainder;
    TF_RETURN_IF_ERROR(b->AddScalar(tstring(prefix_), &prefix));
    TF_RETURN_IF_ERROR(b->AddScalar(tstring(channel_), &channel));
    TF_RETURN_IF_ERROR(b->AddVector(epochs_, &epochs));
    TF_RETURN_IF_ERROR(b->AddScalar(skip_, &skip));
    TF_RETURN_IF_ERROR(b->AddScalar(skip_corrupt_, &skip_corrupt));
    TF_RETURN_IF_ERROR(b->AddScalar(timeout_s_, &timeout));
    TF_RETURN_IF_ERROR(b->AddScalar(batch_size_, &batch_size));
    TF_RETURN_IF_ERROR(b->AddScalar(drop_remainder_, &drop_remainder));
    ::tensorflow::AttrValue format;
    b->BuildAttrValue(format_name_, &format);
    return b->AddDataset(this, {prefix, channel, epochs, skip, skip_corrupt, timeout, batch_size, drop_remainder},
                         {{"record_format", format}}, output);
  }

 private:
  class Iterator : public DatasetIterator<PipeDataset> {
   public:
    explicit Iterator(const Params& params) : DatasetIterator<PipeDataset>(params) {}
    ~Iterator() override { CloseEpoch(); }

    Status GetNextInternal(IteratorContext* ctx, std::vector<Tensor>* out_tensors, bool* end_of_sequence) override {
      std::lock_guard<std::mutex> lock(mu_);
      if (!failed_.ok()) return failed_;
      Status status = Next(ctx, out_tensors, end_of_sequence);
      if (!status.ok()) failed_ = status;
      return status;
    }

   protected:
    std::shared_ptr<::tensorflow::data::model::Node> CreateNode(
        IteratorContext*, ::tensorflow::data::model::Node::Args args) const override {
      return ::tensorflow::data::model::MakeSourceNode(std::move(args));
    }

    Status SaveInternal(SerializationContext*, IteratorStateWriter*) override {
      return errors::Unimplemented("a Pipe-mode dataset's iterator cannot be saved (it reads FIFOs)");
    }

    Status RestoreInternal(IteratorContext*, IteratorStateReader*) override {
      return errors::Unimplemented("a Pipe-mode dataset's iterator cannot be restored (it reads FIFOs)");
    }

   private:
    Status Next(IteratorContext* ctx, std::vector<Tensor>* out_tensors, bool* end_of_sequence) {
      if (dataset()->batch_size_ > 0) return NextBatch(ctx, out_tensors, end_of_sequence);
      tstring record;
      TF_RETURN_IF_ERROR(NextRecord(ctx, &record, end_of_sequence));
      if (*end_of_sequence) return absl::OkStatus();
      Tensor tensor(ctx->allocator({}), DT_STRING, TensorShape({}));
      tensor.scalar<tstring>()() = std::move(record);
      out_tensors->push_back(std::move(tensor));
      return absl::OkStatus();
    }

    // Up to batch_size records, across FIFO reads and epochs, as one vector: the per-element cost of
    // tf.data is paid once per batch. An error after some records of a batch comes with the next
    // call, those records first (as the unbatched reader delivers the records before an error);
    // with drop_remainder a short batch is never delivered.
    Status NextBatch(IteratorContext* ctx, std::vector<Tensor>* out_tensors, bool* end_of_sequence) {
      const PipeDataset* d = dataset();
      // Records are framed straight into the batch's own strings: one copy from the pipe's buffer.
      Tensor batch(ctx->allocator({}), DT_STRING, TensorShape({d->batch_size_}));
      auto flat = batch.flat<tstring>();
      int64_t count = 0;
      bool ended = false;
      Status status;
      while (count < d->batch_size_) {
        status = NextRecord(ctx, &flat(count), &ended);
        if (!status.ok() || ended) break;
        ++count;
      }
      if (!status.ok() && (count == 0 || d->drop_remainder_)) return status;
      if (count == 0 || (count < d->batch_size_ && d->drop_remainder_)) {
        *end_of_sequence = true;
        return absl::OkStatus();
      }
      failed_ = status;  // delivered at the next call, after these records
      if (count < d->batch_size_) {  // the last, short batch
        Tensor short_batch(ctx->allocator({}), DT_STRING, TensorShape({count}));
        auto head = short_batch.flat<tstring>();
        for (int64_t i = 0; i < count; ++i) head(i) = std::move(flat(i));
        batch = std::move(short_batch);
      }
      out_tensors->push_back(std::move(batch));
      *end_of_sequence = false;
      return absl::OkStatus();
    }

    Status NextRecord(IteratorContext* ctx, tstring* record, bool* end_of_sequence) {
      bool got = false;
      while (true) {
        if (fd_ < 0) {
          if (next_epoch_ >= dataset()->epochs_.size()) {
            *end_of_sequence = true;
            return absl::OkStatus();
          }
          TF_RETURN_IF_ERROR(OpenEpoch(ctx));
        }
        TF_RETURN_IF_ERROR(Named(framer_->Next(record, &got)));
        if (got) break;
        if (!at_end_) {
          TF_RETURN_IF_ERROR(Read(ctx));
          continue;
        }
        const Status finished = Named(framer_->Finish(record, &got));
        CloseEpoch();
        TF_RETURN_IF_ERROR(finished);
        if (got) break;
      }
      *end_of_sequence = false;
      return absl::OkStatus();
    }

    Status OpenEpoch(IteratorContext* ctx) {
      const PipeDataset* d = dataset();
      const int64_t epoch = d->epochs_[next_epoch_];
      path_ = d->prefix_ + "_" + std::to_string(epoch);
      where_ = "channel '" + d->channel_ + "' epoch " + std::to_string(epoch) + " (" + path_ + ")";
      TF_RETURN_IF_ERROR(OpenFifo(ctx, path_, d->timeout_s_, &fd_));
      framer_ = std::make_unique<Framer>(d->format_, next_epoch_ == 0 ? d->skip_ : 0, d->skip_corrupt_);
      at_end_ = false;
      ++next_epoch_;
      return absl::OkStatus();
    }

    // Reads what the FIFO has, waiting in short polls so that a cancelled iterator stops.
    Status Read(IteratorContext* ctx) {
      while (true) {
        const ssize_t n = framer_->Fill(fd_);
        if (n > 0) {
          Progress::Alive();
          return absl::OkStatus();
        }
        if (n == 0) {
          at_end_ = true;
          return absl::OkStatus();
        }
        if (errno != EAGAIN && errno != EWOULDBLOCK) {
          return errors::Unavailable(where_, ": read failed: ", std::strerror(errno));
        }
        struct pollfd poller = {fd_, POLLIN | POLLHUP, 0};
        poll(&poller, 1, 200);
        if (Cancelled(ctx)) return errors::Cancelled(where_, ": reading was cancelled");
      }
    }

    Status Named(Status status) const {
      if (status.ok()) return status;
      return Status(status.code(), where_ + ": " + std::string(status.message()));
    }

    void CloseEpoch() {
      if (fd_ >= 0) close(fd_);
      fd_ = -1;
      framer_.reset();
    }

    std::mutex mu_;
    size_t next_epoch_ = 0;
    int fd_ = -1;
    bool at_end_ = false;
    std::unique_ptr<Framer> framer_;
    std::string path_;
    std::string where_;
    Status failed_;
  };

  const std::string prefix_;
  const std::string channel_;
  const std::vector<int64_t> epochs_;
  const int64_t skip_;
  const int64_t skip_corrupt_;
  const float timeout_s_;
  const int64_t batch_size_;  // 0: one record per element
  const bool drop_remainder_;
  const std::string format_name_;
  const Format format_;
  const std::vector<PartialTensorShape> shapes_;
};

class PipeDatasetOp : public DatasetOpKernel {
 public:
  explicit PipeDatasetOp(OpKernelConstruction* ctx) : DatasetOpKernel(ctx) {
    OP_REQUIRES_OK(ctx, ctx->GetAttr("record_format", &format_name_));
    if (format_name_ == "tfrecord") {
      format_ = Format::kTFRecord;
    } else if (format_name_ == "recordio") {
      format_ = Format::kRecordIO;
    } else if (format_name_ == "lines") {
      format_ = Format::kLines;
    } else {
      ctx->CtxFailure(errors::InvalidArgument("unknown record format '", format_name_,
                                              "'; expected one of tfrecord, recordio, lines"));
    }
  }

  void MakeDataset(OpKernelContext* ctx, DatasetBase** output) override {
    tstring prefix, channel;
    int64_t skip = 0, skip_corrupt = 0, batch_size = 0;
    bool drop_remainder = false;
    float timeout_s = 0;
    std::vector<int64_t> epochs;
    OP_REQUIRES_OK(ctx, ::tensorflow::data::ParseScalarArgument(ctx, "prefix", &prefix));
    OP_REQUIRES_OK(ctx, ::tensorflow::data::ParseScalarArgument(ctx, "channel", &channel));
    OP_REQUIRES_OK(ctx, ::tensorflow::data::ParseVectorArgument(ctx, "epochs", &epochs));
    OP_REQUIRES_OK(ctx, ::tensorflow::data::ParseScalarArgument(ctx, "skip", &skip));
    OP_REQUIRES_OK(ctx, ::tensorflow::data::ParseScalarArgument(ctx, "skip_corrupt", &skip_corrupt));
    OP_REQUIRES_OK(ctx, ::tensorflow::data::ParseScalarArgument(ctx, "timeout_s", &timeout_s));
    OP_REQUIRES_OK(ctx, ::tensorflow::data::ParseScalarArgument(ctx, "batch_size", &batch_size));
    OP_REQUIRES_OK(ctx, ::tensorflow::data::ParseScalarArgument(ctx, "drop_remainder", &drop_remainder));
    OP_REQUIRES(ctx, skip >= 0 && skip_corrupt >= 0,
                errors::InvalidArgument("skip and skip_corrupt must be >= 0, got ", skip, " and ", skip_corrupt));
    OP_REQUIRES(ctx, batch_size >= 0, errors::InvalidArgument("batch_size must be >= 0, got ", batch_size));
    *output = new PipeDataset(ctx, std::string(prefix), std::string(channel), std::move(epochs), skip, skip_corrupt,
                              timeout_s, batch_size, drop_remainder, format_name_, format_);
  }

 private:
  std::string format_name_;
  Format format_ = Format::kTFRecord;
};

}  // namespace

REGISTER_OP("SmtrainPipeDataset")
    .Input("prefix: string")
    .Input("channel: string")
    .Input("epochs: int64")
    .Input("skip: int64")
    .Input("skip_corrupt: int64")
    .Input("timeout_s: float")
    .Input("batch_size: int64")  // 0: scalar records; N: vectors of up to N records
    .Input("drop_remainder: bool")
    .Output("handle: variant")
    .Attr("record_format: string")
    .SetIsStateful()  // a source dataset: never constant-folded (as TFRecordDataset)
    .SetShapeFn(::tensorflow::shape_inference::ScalarShape);

REGISTER_KERNEL_BUILDER(Name("SmtrainPipeDataset").Device(::tensorflow::DEVICE_CPU), PipeDatasetOp);

}  // namespace smtrain
