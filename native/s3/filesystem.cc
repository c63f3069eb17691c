// TensorFlow's s3:// file system through its stable C plugin interface (filesystem_interface.h).
// Objects are files; a "folder" is a key prefix ending in '/', or an empty marker object "prefix/"
// (what create_dir writes, as TensorFlow's former S3 file system did). Reads fetch ahead in ranges;
// writes are buffered and uploaded on flush/close, in multipart parts once they pass the part size.
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "client.h"
#include "upload.h"
#include "tensorflow/c/experimental/filesystem/filesystem_interface.h"
#include "tensorflow/c/tf_status.h"

namespace smtrain_s3 {
namespace {

size_t SizeEnv(const char* name, size_t otherwise, size_t minimum) {
  const char* v = getenv(name);
  long long n = v ? atoll(v) : 0;
  return n > 0 ? std::max(static_cast<size_t>(n), minimum) : otherwise;
}

struct Path {
  std::string bucket, key;  // key without a trailing '/'
};

bool Parse(const char* uri, Path* out, TF_Status* status) {
  std::string s(uri);
  if (s.rfind("s3://", 0) != 0 || s.size() == 5 || s[5] == '/') {
    TF_SetStatus(status, TF_INVALID_ARGUMENT, (s + ": expected s3://bucket/key").c_str());
    return false;
  }
  s = s.substr(5);
  size_t slash = s.find('/');
  out->bucket = s.substr(0, slash);
  out->key = slash == std::string::npos ? "" : s.substr(slash + 1);
  while (!out->key.empty() && out->key.back() == '/') out->key.pop_back();
  TF_SetStatus(status, TF_OK, "");
  return true;
}

bool Fail(const Outcome& o, TF_Status* status) {
  TF_SetStatus(status, o.code, o.message.c_str());
  return !o.ok();
}

Client* ClientOf(const TF_Filesystem* fs) { return static_cast<Client*>(fs->plugin_filesystem); }

long long ParseHttpDate(const std::string& s) {  // Thu, 26 Nov 2026 21:00:00 GMT
  struct tm tm = {};
  if (strptime(s.c_str(), "%a, %d %b %Y %H:%M:%S", &tm) == nullptr) return 0;
  return static_cast<long long>(timegm(&tm));
}

// HEAD on a key: true with its size and mtime when it is an object.
Outcome Head(Client* c, const Path& p, long long* size, long long* mtime) {
  Outcome o = c->Call("HEAD", p.bucket, p.key, {}, {});
  if (o.ok()) {
    *size = atoll(o.response.headers["content-length"].c_str());
    *mtime = ParseHttpDate(o.response.headers["last-modified"]);
  } else if (o.code == TF_NOT_FOUND && !p.key.empty()) {  // a HEAD answer has no body to say which is missing
    Outcome bucket = c->Call("HEAD", p.bucket, "", {}, {});
    if (bucket.code == TF_NOT_FOUND) o.message = "s3://" + p.bucket + "/" + p.key + ": bucket " + p.bucket + " does not exist";
  }
  return o;
}

// Whether anything lies under "key/" (a folder). Fails on a missing bucket.
Outcome HasChildren(Client* c, const Path& p, bool* yes) {
  Listing listing;
  Outcome o = c->List(p.bucket, p.key.empty() ? "" : p.key + "/", false, &listing, 1);
  *yes = !listing.keys.empty() || !listing.prefixes.empty();
  return o;
}

enum class Kind { kMissing, kFile, kFolder };

Kind Classify(Client* c, const Path& p, long long* size, long long* mtime, TF_Status* status) {
  *size = 0;
  *mtime = 0;
  if (p.key.empty()) {
    if (Fail(c->Call("HEAD", p.bucket, "", {}, {}), status)) return Kind::kMissing;
    return Kind::kFolder;
  }
  Outcome head = Head(c, p, size, mtime);
  if (head.ok()) {
    TF_SetStatus(status, TF_OK, "");
    return Kind::kFile;
  }
  if (head.code != TF_NOT_FOUND) {
    Fail(head, status);
    return Kind::kMissing;
  }
  bool folder = false;
  if (Fail(HasChildren(c, p, &folder), status)) return Kind::kMissing;
  if (folder) return Kind::kFolder;
  TF_SetStatus(status, TF_NOT_FOUND, ("s3://" + p.bucket + "/" + p.key + ": no such key or folder").c_str());
  return Kind::kMissing;
}

// ---- random access files --------------------------------------------------------------------------

// A reader that starts at 0 or goes on from where its last read ended is served by one streaming GET to
// the end of the object (TFRecordDataset, whole-file reads); other reads fetch a range ahead (8 MB by default) into
// a buffer. A failed stream falls back to ranged GETs, which are retried.
struct ReadFile {
  Client* client;
  Path path;
  long long size;
  size_t readahead;
  std::mutex mu;
  std::string buffer;
  long long buffer_offset = 0;
  long long last_end = -1;  // where the previous read stopped
  std::unique_ptr<HttpStream> stream;
  long long stream_pos = 0;
};

void ReadCleanup(TF_RandomAccessFile* file) { delete static_cast<ReadFile*>(file->plugin_file); }

// From the stream, when it is at `pos` (or can be started there): bytes read, 0 when it cannot serve.
long long FromStream(ReadFile* f, long long pos, char* out, long long want) {
  if (f->stream && f->stream_pos != pos) f->stream.reset();
  if (!f->stream) {
    // sequential: on from the last read, or a first read from the start (a TFRecord file, a whole-file read)
    bool sequential = pos == f->last_end || (pos == 0 && f->last_end < 0);
    if (!sequential || f->size - pos <= static_cast<long long>(f->readahead)) return 0;
    HttpRequest request;
    Outcome error;
    std::map<std::string, std::string> headers;
    if (pos > 0) headers["range"] = "bytes=" + std::to_string(pos) + "-";  // from the start: a plain GET
    if (!f->client->PrepareGet(f->path.bucket, f->path.key, headers, &request, &error))
      return 0;
    f->stream.reset(new HttpStream(request));
    f->stream_pos = pos;
  }
  long long got = static_cast<long long>(f->stream->Read(out, static_cast<size_t>(want)));
  f->stream_pos += got;
  if (f->stream->failed() || got < want) f->stream.reset();  // ranged GETs (with retries) take over
  return got;
}

int64_t Read(const TF_RandomAccessFile* file, uint64_t offset, size_t n, char* out, TF_Status* status) {
  auto* f = static_cast<ReadFile*>(file->plugin_file);
  const long long end = std::min<long long>(f->size, static_cast<long long>(offset + n));
  long long pos = static_cast<long long>(offset);
  std::lock_guard<std::mutex> lock(f->mu);
  while (pos < end) {
    long long buffered_end = f->buffer_offset + static_cast<long long>(f->buffer.size());
    if (pos >= f->buffer_offset && pos < buffered_end) {
      long long take = std::min(end, buffered_end) - pos;
      memcpy(out + (pos - offset), f->buffer.data() + (pos - f->buffer_offset), take);
      pos += take;
      continue;
    }
    long long streamed = FromStream(f, pos, out + (pos - offset), end - pos);
    if (streamed > 0) {
      pos += streamed;
      continue;
    }
    long long want = end - pos;
    bool direct = static_cast<size_t>(want) >= f->readahead;  // large reads go straight to the caller
    long long fetch = direct ? want : std::min<long long>(f->readahead, f->size - pos);
    std::string range = "bytes=" + std::to_string(pos) + "-" + std::to_string(pos + fetch - 1);
    if (!direct) f->buffer.resize(fetch);
    char* sink = direct ? out + (pos - offset) : &f->buffer[0];
    Outcome o = f->client->Call("GET", f->path.bucket, f->path.key, {}, {{"range", range}}, nullptr, 0, sink, fetch);
    if (!o.ok()) {
      f->buffer.clear();
      Fail(o, status);
      return pos - static_cast<long long>(offset);
    }
    long long got = static_cast<long long>(o.response.sink_bytes);
    if (got == 0) break;  // the object shrank under us
    if (direct) {
      pos += got;
    } else {
      f->buffer.resize(got);
      f->buffer_offset = pos;
    }
  }
  f->last_end = pos;
  long long read = pos - static_cast<long long>(offset);
  if (read < static_cast<long long>(n)) {
    TF_SetStatus(status, TF_OUT_OF_RANGE, "read past the end of the object");
  } else {
    TF_SetStatus(status, TF_OK, "");
  }
  return read;
}

// ---- writable files ---------------------------------------------------------------------------------

struct WriteFile {
  Client* client;
  Path path;
  size_t threshold;  // a file up to this size is one PUT (and visible at each flush)
  size_t part_size;
  size_t in_flight;
  std::string buffer;  // bytes not yet in a part
  long long total = 0;
  bool dirty = true;   // the object does not yet hold every byte appended
  std::unique_ptr<MultipartUpload> upload;
};

void WriteCleanup(TF_WritableFile* file) { delete static_cast<WriteFile*>(file->plugin_file); }  // aborts an upload

bool ShipPart(WriteFile* f, std::string part, TF_Status* status) {
  Outcome error;
  if (!f->upload) f->upload.reset(new MultipartUpload(f->client, f->path.bucket, f->path.key, f->in_flight));
  return f->upload->Add(std::move(part), &error) || !Fail(error, status);
}

// Bytes go into part-sized buffers that move, whole, to the upload: no copy of a large write.
void Append(const TF_WritableFile* file, const char* data, size_t n, TF_Status* status) {
  auto* f = static_cast<WriteFile*>(file->plugin_file);
  f->total += static_cast<long long>(n);
  f->dirty = true;
  TF_SetStatus(status, TF_OK, "");
  if (!f->upload && f->buffer.size() + n <= f->threshold) {
    f->buffer.append(data, n);
    return;
  }
  if (!f->upload) {  // past the threshold: what was buffered goes up in parts
    std::string held = std::move(f->buffer);
    size_t at = 0;
    for (; held.size() - at >= f->part_size; at += f->part_size) {
      if (!ShipPart(f, held.substr(at, f->part_size), status)) return;
    }
    f->buffer.assign(held, at, std::string::npos);
  }
  while (n > 0) {
    if (f->buffer.capacity() < f->part_size) f->buffer.reserve(f->part_size);
    size_t take = std::min(n, f->part_size - f->buffer.size());
    f->buffer.append(data, take);
    data += take;
    n -= take;
    if (f->buffer.size() == f->part_size) {
      if (!ShipPart(f, std::move(f->buffer), status)) return;
      f->buffer = std::string();
    }
  }
}

int64_t Tell(const TF_WritableFile* file, TF_Status* status) {
  TF_SetStatus(status, TF_OK, "");
  return static_cast<WriteFile*>(file->plugin_file)->total;
}

// Flush publishes what was written so far while the file fits one upload (TensorBoard's event files,
// which TensorFlow checks for after each flush); past that the bytes wait for close.
void Flush(const TF_WritableFile* file, TF_Status* status) {
  auto* f = static_cast<WriteFile*>(file->plugin_file);
  TF_SetStatus(status, TF_OK, "");
  if (!f->dirty || f->upload) return;
  if (!Fail(f->client->Call("PUT", f->path.bucket, f->path.key, {}, {}, f->buffer.data(), f->buffer.size()), status))
    f->dirty = false;
}

void Close(const TF_WritableFile* file, TF_Status* status) {
  auto* f = static_cast<WriteFile*>(file->plugin_file);
  if (!f->upload) {
    Flush(file, status);
    return;
  }
  if (!f->buffer.empty() && !ShipPart(f, std::move(f->buffer), status)) return;
  f->buffer.clear();
  Outcome error;
  if (!f->upload->Complete(&error)) {
    Fail(error, status);
    return;
  }
  f->upload.reset();
  f->dirty = false;
  TF_SetStatus(status, TF_OK, "");
}

// ---- the file system ----------------------------------------------------------------------------------

void Init(TF_Filesystem* fs, TF_Status* status) {
  fs->plugin_filesystem = new Client();
  TF_SetStatus(status, TF_OK, "");
}

void Cleanup(TF_Filesystem* fs) { delete ClientOf(fs); }

void NewRandomAccessFile(const TF_Filesystem* fs, const char* uri, TF_RandomAccessFile* file, TF_Status* status) {
  Path p;
  if (!Parse(uri, &p, status)) return;
  long long size = 0, mtime = 0;
  if (Fail(Head(ClientOf(fs), p, &size, &mtime), status)) return;
  file->plugin_file =
      new ReadFile{ClientOf(fs), p, size, SizeEnv("SMTRAIN_S3_READAHEAD_BYTES", 8 << 20, 64 << 10), {}, {}, 0, -1, {}, 0};
}

WriteFile* NewWriter(const TF_Filesystem* fs, const Path& p) {
  return new WriteFile{ClientOf(fs), p, SizeEnv("SMTRAIN_S3_MULTIPART_THRESHOLD_BYTES", 32 << 20, 5 << 20),
                       SizeEnv("SMTRAIN_S3_PART_BYTES", 8 << 20, 5 << 20), SizeEnv("SMTRAIN_S3_UPLOADS_IN_FLIGHT", 8, 1)};
}

void NewWritableFile(const TF_Filesystem* fs, const char* uri, TF_WritableFile* file, TF_Status* status) {
  Path p;
  if (!Parse(uri, &p, status)) return;
  if (p.key.empty()) {
    TF_SetStatus(status, TF_INVALID_ARGUMENT, (std::string(uri) + ": a file needs a key after the bucket").c_str());
    return;
  }
  file->plugin_file = NewWriter(fs, p);
}

// S3 cannot append: the object's bytes so far are read back and written again on close.
void NewAppendableFile(const TF_Filesystem* fs, const char* uri, TF_WritableFile* file, TF_Status* status) {
  NewWritableFile(fs, uri, file, status);
  if (TF_GetCode(status) != TF_OK) return;
  auto* f = static_cast<WriteFile*>(file->plugin_file);
  Outcome o = f->client->Call("GET", f->path.bucket, f->path.key, {}, {});
  if (o.ok()) {
    f->buffer = std::move(o.response.body);
    f->total = static_cast<long long>(f->buffer.size());
  } else if (o.code != TF_NOT_FOUND) {
    Fail(o, status);
    delete f;
    file->plugin_file = nullptr;
  }
}

void CreateDir(const TF_Filesystem* fs, const char* uri, TF_Status* status) {
  Path p;
  if (!Parse(uri, &p, status)) return;
  Client* c = ClientOf(fs);
  if (p.key.empty()) {
    Fail(c->Call("HEAD", p.bucket, "", {}, {}), status);
    return;
  }
  Fail(c->Call("PUT", p.bucket, p.key + "/", {}, {}, "", 0), status);
}

void DeleteFile(const TF_Filesystem* fs, const char* uri, TF_Status* status) {
  Path p;
  if (!Parse(uri, &p, status)) return;
  long long size, mtime;
  if (Fail(Head(ClientOf(fs), p, &size, &mtime), status)) return;
  Fail(ClientOf(fs)->Call("DELETE", p.bucket, p.key, {}, {}), status);
}

void DeleteDir(const TF_Filesystem* fs, const char* uri, TF_Status* status) {
  Path p;
  if (!Parse(uri, &p, status)) return;
  Listing listing;
  if (Fail(ClientOf(fs)->List(p.bucket, p.key + "/", false, &listing, 2), status)) return;
  for (const auto& k : listing.keys) {
    if (k != p.key + "/") {
      TF_SetStatus(status, TF_FAILED_PRECONDITION, (std::string(uri) + ": folder not empty").c_str());
      return;
    }
  }
  if (listing.keys.empty()) {
    TF_SetStatus(status, TF_NOT_FOUND, (std::string(uri) + ": no such folder").c_str());
    return;
  }
  Fail(ClientOf(fs)->Call("DELETE", p.bucket, p.key + "/", {}, {}), status);
}

void DeleteRecursively(const TF_Filesystem* fs, const char* uri, uint64_t* undeleted_files, uint64_t* undeleted_dirs,
                       TF_Status* status) {
  Path p;
  *undeleted_files = *undeleted_dirs = 0;
  if (!Parse(uri, &p, status)) return;
  Client* c = ClientOf(fs);
  Listing listing;
  if (Fail(c->List(p.bucket, p.key.empty() ? "" : p.key + "/", false, &listing), status)) return;
  long long size, mtime;
  if (!p.key.empty() && Head(c, p, &size, &mtime).ok()) listing.keys.push_back(p.key);
  if (listing.keys.empty()) {
    TF_SetStatus(status, TF_NOT_FOUND, (std::string(uri) + ": no such key or folder").c_str());
    return;
  }
  Outcome last;
  for (const auto& k : listing.keys) {
    Outcome o = c->Call("DELETE", p.bucket, k, {}, {});
    if (!o.ok()) {
      ++*undeleted_files;
      last = o;
    }
  }
  Fail(last, status);
}

bool CopyObject(Client* c, const Path& src, const Path& dst, const std::string& src_key, const std::string& dst_key,
                TF_Status* status) {
  Outcome o = c->Call("PUT", dst.bucket, dst_key, {},
                      {{"x-amz-copy-source", "/" + UriEncode(src.bucket, false) + "/" + UriEncode(src_key, true)}});
  return !Fail(o, status);
}

// Rename is copy then delete (S3 has no rename): TensorFlow's checkpoints write aside and rename.
void RenameFile(const TF_Filesystem* fs, const char* from, const char* to, TF_Status* status) {
  Path src, dst;
  if (!Parse(from, &src, status) || !Parse(to, &dst, status)) return;
  Client* c = ClientOf(fs);
  long long size = 0, mtime = 0;
  Kind kind = Classify(c, src, &size, &mtime, status);
  if (kind == Kind::kMissing) return;
  if (kind == Kind::kFile) {
    if (size > (5LL << 30)) {
      TF_SetStatus(status, TF_UNIMPLEMENTED, (std::string(from) + ": renaming objects over 5 GB is not supported").c_str());
      return;
    }
    if (!CopyObject(c, src, dst, src.key, dst.key, status)) return;
    Fail(c->Call("DELETE", src.bucket, src.key, {}, {}), status);
    return;
  }
  Listing listing;
  if (Fail(c->List(src.bucket, src.key + "/", false, &listing), status)) return;
  for (const auto& k : listing.keys) {
    if (!CopyObject(c, src, dst, k, dst.key + "/" + k.substr(src.key.size() + 1), status)) return;
  }
  for (const auto& k : listing.keys) {
    if (Fail(c->Call("DELETE", src.bucket, k, {}, {}), status)) return;
  }
}

void CopyFile(const TF_Filesystem* fs, const char* from, const char* to, TF_Status* status) {
  Path src, dst;
  if (!Parse(from, &src, status) || !Parse(to, &dst, status)) return;
  CopyObject(ClientOf(fs), src, dst, src.key, dst.key, status);
}

void Stat(const TF_Filesystem* fs, const char* uri, TF_FileStatistics* stats, TF_Status* status) {
  Path p;
  if (!Parse(uri, &p, status)) return;
  long long size = 0, mtime = 0;
  Kind kind = Classify(ClientOf(fs), p, &size, &mtime, status);
  if (kind == Kind::kMissing) return;
  stats->length = size;
  stats->mtime_nsec = mtime * 1000000000LL;
  stats->is_directory = kind == Kind::kFolder;
}

void PathExists(const TF_Filesystem* fs, const char* uri, TF_Status* status) {
  TF_FileStatistics stats;
  Stat(fs, uri, &stats, status);
}

bool IsDirectory(const TF_Filesystem* fs, const char* uri, TF_Status* status) {
  TF_FileStatistics stats;
  Stat(fs, uri, &stats, status);
  if (TF_GetCode(status) != TF_OK) return false;
  if (!stats.is_directory) TF_SetStatus(status, TF_FAILED_PRECONDITION, (std::string(uri) + ": not a folder").c_str());
  return stats.is_directory;
}

int64_t GetFileSize(const TF_Filesystem* fs, const char* uri, TF_Status* status) {
  Path p;
  if (!Parse(uri, &p, status)) return -1;
  long long size = 0, mtime = 0;
  if (Fail(Head(ClientOf(fs), p, &size, &mtime), status)) return -1;
  return size;
}

int GetChildren(const TF_Filesystem* fs, const char* uri, char*** entries, TF_Status* status) {
  Path p;
  *entries = nullptr;
  if (!Parse(uri, &p, status)) return -1;
  Client* c = ClientOf(fs);
  const std::string prefix = p.key.empty() ? "" : p.key + "/";
  Listing listing;
  if (Fail(c->List(p.bucket, prefix, true, &listing), status)) return -1;
  std::vector<std::string> names;
  for (const auto& k : listing.keys)
    if (k.size() > prefix.size()) names.push_back(k.substr(prefix.size()));
  for (const auto& d : listing.prefixes) names.push_back(d.substr(prefix.size(), d.size() - prefix.size() - 1));
  if (names.empty() && listing.keys.empty() && !p.key.empty()) {
    long long size, mtime;
    if (Classify(c, p, &size, &mtime, status) == Kind::kMissing) return -1;
  }
  *entries = static_cast<char**>(malloc(sizeof(char*) * std::max<size_t>(names.size(), 1)));
  for (size_t i = 0; i < names.size(); ++i) (*entries)[i] = strdup(names[i].c_str());
  TF_SetStatus(status, TF_OK, "");
  return static_cast<int>(names.size());
}

// TensorFlow hands every operation the translated name: the default keeps only the path, dropping the
// bucket. Ours is the URI itself.
char* TranslateName(const TF_Filesystem*, const char* uri) { return strdup(uri); }

}  // namespace
}  // namespace smtrain_s3

extern "C" TF_CAPI_EXPORT void TF_InitPlugin(TF_FilesystemPluginInfo* info) {
  using namespace smtrain_s3;
  info->plugin_memory_allocate = malloc;
  info->plugin_memory_free = free;
  info->num_schemes = 1;
  info->ops = static_cast<TF_FilesystemPluginOps*>(calloc(1, sizeof(TF_FilesystemPluginOps)));
  TF_FilesystemPluginOps* ops = info->ops;
  ops->scheme = strdup("s3");
  TF_SetFilesystemVersionMetadata(ops);
  auto* rf = static_cast<TF_RandomAccessFileOps*>(calloc(1, TF_RANDOM_ACCESS_FILE_OPS_SIZE));
  rf->cleanup = ReadCleanup;
  rf->read = Read;
  ops->random_access_file_ops = rf;
  auto* wf = static_cast<TF_WritableFileOps*>(calloc(1, TF_WRITABLE_FILE_OPS_SIZE));
  wf->cleanup = WriteCleanup;
  wf->append = Append;
  wf->tell = Tell;
  wf->flush = Flush;
  wf->sync = Flush;
  wf->close = Close;
  ops->writable_file_ops = wf;
  auto* f = static_cast<TF_FilesystemOps*>(calloc(1, TF_FILESYSTEM_OPS_SIZE));
  f->init = Init;
  f->cleanup = Cleanup;
  f->new_random_access_file = NewRandomAccessFile;
  f->new_writable_file = NewWritableFile;
  f->new_appendable_file = NewAppendableFile;
  f->create_dir = CreateDir;
  f->recursively_create_dir = CreateDir;  // one marker: S3 folders above it exist by prefix
  f->delete_file = DeleteFile;
  f->delete_dir = DeleteDir;
  f->delete_recursively = DeleteRecursively;
  f->rename_file = RenameFile;
  f->copy_file = CopyFile;
  f->path_exists = PathExists;
  f->stat = Stat;
  f->is_directory = IsDirectory;
  f->get_file_size = GetFileSize;
  f->get_children = GetChildren;
  f->translate_name = TranslateName;
  ops->filesystem_ops = f;
}
