// A multipart upload whose parts go up in parallel (up to `max_in_flight` at once), as boto3's
// transfer manager does: one connection per part, S3 (or the server) taking them side by side.
#pragma once
#include <deque>
#include <future>
#include <string>
#include <vector>

#include "client.h"

namespace smtrain_s3 {

class MultipartUpload {
 public:
  MultipartUpload(Client* client, std::string bucket, std::string key, size_t max_in_flight);
  ~MultipartUpload();  // aborts an upload that was not completed
  // Queues one part (its bytes move in); waits for the oldest part while `max_in_flight` are on their way.
  bool Add(std::string part, Outcome* error);
  bool Complete(Outcome* error);  // every part up, then S3 joins them
  void Abort();

 private:
  bool WaitUntil(size_t in_flight, Outcome* error);
  Client* client_;
  std::string bucket_, key_, upload_id_;
  size_t max_in_flight_;
  std::deque<std::future<Outcome>> pending_;  // in part order
  std::vector<std::string> etags_;
  int parts_ = 0;
};

}  // namespace smtrain_s3
