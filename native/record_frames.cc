// smtrain_frame_stops: where each whole framed record in a buffer ends (TFRecord, RecordIO, text lines).
//
// The host's Pipe-mode demultiplexer (smtrain/data/demux.py) deals whole records to the ranks but
// never looks inside them: it only needs their boundaries. In Python (RecordSplitter.frame_spans)
// that walk costs about 0.3 us a record, which for 100-byte records caps the demultiplexer at
// about 3 M records/s while one rank's native reader takes 8-9 M/s. This walk is the same framing
// as RecordSplitter's with CRCs left unchecked (each rank's reader checks them), in plain C++ with
// no TensorFlow, so the demultiplexer - which does not import TensorFlow - loads it with ctypes
// (smtrain/data/frames.py). Built by scripts/build-native.sh; where it is missing, the Python walk
// is used.
#include <cstdint>
#include <cstring>

namespace {

constexpr uint32_t kRecordIoMagic = 0xced7230au;
constexpr uint32_t kLengthMask = (1u << 29) - 1;

enum Format : int32_t { kTfRecord = 0, kRecordIo = 1, kLines = 2 };

inline uint64_t Load64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, sizeof v);  // little-endian hosts only (x86-64, aarch64), as TFRecord itself
  return v;
}

inline uint32_t Load32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

}  // namespace

extern "C" {

// Frames the whole records of `format` in buf[start, end): writes the offset just past each one into
// stops[0..n) (at most max_stops) and returns n. *next: the first byte not taken (an unfinished record
// or, for RecordIO, the first part of an unfinished multi-part record). *error: the offset of a RecordIO
// part without the magic, else -1 (the records before it are still returned). A multi-part RecordIO
// record is one record.
int64_t smtrain_frame_stops(int32_t format, const uint8_t* buf, int64_t start, int64_t end, int64_t* stops,
                            int64_t max_stops, int64_t* next, int64_t* error) {
  int64_t pos = start, n = 0;
  *error = -1;
  if (format == kTfRecord) {
    while (n < max_stops && end - pos >= 16) {
      const uint64_t length = Load64(buf + pos);
      if (length > static_cast<uint64_t>(end - pos - 16)) break;  // not all here yet (or a huge length)
      pos += 16 + static_cast<int64_t>(length);
      stops[n++] = pos;
    }
  } else if (format == kRecordIo) {
    int64_t group = -1;  // the first part of a multi-part record being walked
    int64_t at = pos;
    while (n < max_stops && end - at >= 8) {
      if (Load32(buf + at) != kRecordIoMagic) {
        *error = at;
        break;
      }
      const uint32_t word = Load32(buf + at + 4);
      const int64_t length = word & kLengthMask;
      const int64_t stop = at + 8 + length + ((-length) & 3);
      if (stop > end) break;
      const uint32_t flag = word >> 29;
      if (flag == 1 || flag == 2) {  // a part that more parts follow
        if (group < 0) group = at;
        at = stop;
        continue;
      }
      group = -1;
      at = pos = stop;
      stops[n++] = stop;
    }
  } else if (format == kLines) {
    while (n < max_stops && pos < end) {
      const void* nl = std::memchr(buf + pos, '\n', static_cast<size_t>(end - pos));
      if (nl == nullptr) break;
      pos = static_cast<const uint8_t*>(nl) - buf + 1;
      stops[n++] = pos;
    }
  } else {
    *error = start;
  }
  *next = pos;
  return n;
}

}  // extern "C"
