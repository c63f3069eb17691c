#include "upload.h"

#include <utility>

namespace smtrain_s3 {

MultipartUpload::MultipartUpload(Client* client, std::string bucket, std::string key, size_t max_in_flight)
    : client_(client), bucket_(std::move(bucket)), key_(std::move(key)), max_in_flight_(std::max<size_t>(1, max_in_flight)) {}

MultipartUpload::~MultipartUpload() { Abort(); }

bool MultipartUpload::WaitUntil(size_t in_flight, Outcome* error) {
  bool ok = true;
  while (pending_.size() > in_flight) {
    Outcome o = pending_.front().get();
    pending_.pop_front();
    if (!o.ok() && ok) {
      *error = o;
      ok = false;
      in_flight = 0;  // a part failed: wait for the rest, then give up
    }
    etags_.push_back(o.response.headers["etag"]);
  }
  return ok;
}

bool MultipartUpload::Add(std::string part, Outcome* error) {
  if (upload_id_.empty()) {
    Outcome o = client_->Call("POST", bucket_, key_, {{"uploads", ""}}, {});
    if (!o.ok()) {
      *error = o;
      return false;
    }
    upload_id_ = XmlValue(o.response.body, "InitiateMultipartUploadResult/UploadId");
  }
  if (!WaitUntil(max_in_flight_ - 1, error)) {
    Abort();
    return false;
  }
  std::map<std::string, std::string> query{{"partNumber", std::to_string(++parts_)}, {"uploadId", upload_id_}};
  pending_.push_back(std::async(std::launch::async, [this, query, bytes = std::move(part)] {
    return client_->Call("PUT", bucket_, key_, query, {}, bytes.data(), bytes.size());
  }));
  return true;
}

bool MultipartUpload::Complete(Outcome* error) {
  if (!WaitUntil(0, error)) {
    Abort();
    return false;
  }
  std::string xml = "<CompleteMultipartUpload>";
  for (size_t i = 0; i < etags_.size(); ++i)
    xml += "<Part><PartNumber>" + std::to_string(i + 1) + "</PartNumber><ETag>" + etags_[i] + "</ETag></Part>";
  xml += "</CompleteMultipartUpload>";
  Outcome o = client_->Call("POST", bucket_, key_, {{"uploadId", upload_id_}}, {{"content-type", "application/xml"}},
                            xml.data(), xml.size());
  if (!o.ok()) {
    *error = o;
    Abort();
    return false;
  }
  upload_id_.clear();
  return true;
}

void MultipartUpload::Abort() {
  Outcome ignored;
  WaitUntil(0, &ignored);
  if (upload_id_.empty()) return;
  client_->Call("DELETE", bucket_, key_, {{"uploadId", upload_id_}}, {});
  upload_id_.clear();
}

}  // namespace smtrain_s3
