// S3's REST operations over http.h: endpoint and region as AWS SDKs resolve them, SigV4, retries with
// backoff on throttling, 5xx and broken connections, and errors that name the bucket, key and cause.
#pragma once
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "credentials.h"
#include "http.h"
#include "tensorflow/c/tf_status.h"

namespace smtrain_s3 {

struct Outcome {
  TF_Code code = TF_OK;
  std::string message;
  HttpResponse response;
  bool ok() const { return code == TF_OK; }
};

struct Listing {
  std::vector<std::string> keys;      // full keys
  std::vector<long long> sizes;
  std::vector<std::string> prefixes;  // common prefixes, with their trailing '/'
};

// Where requests go, read from the environment at each request (a script may set it after importing
// TensorFlow, as it would before creating a boto3 client).
struct Endpoint {
  std::string base;    // scheme://host[:port] when overridden, else empty (AWS)
  std::string region;  // the job's
  bool verify_tls = true;
  int max_attempts = 5;
};
Endpoint EndpointFromEnvironment();

class Client {
 public:
  // One request; `query` unencoded. Body and sink as HttpRequest's.
  Outcome Call(const std::string& method, const std::string& bucket, const std::string& key,
               const std::map<std::string, std::string>& query, std::map<std::string, std::string> headers,
               const char* body = nullptr, size_t body_size = 0, char* sink = nullptr, size_t sink_capacity = 0);
  // A signed GET, for a caller that streams the answer itself (http.h's HttpStream).
  bool PrepareGet(const std::string& bucket, const std::string& key, std::map<std::string, std::string> headers,
                  HttpRequest* request, Outcome* error);
  // Every key under `prefix` (delimiter '/': one level, else all); max_keys > 0 stops early.
  Outcome List(const std::string& bucket, const std::string& prefix, bool one_level, Listing* out, int max_keys = 0);

 private:
  std::string RegionFor(const std::string& bucket, const std::string& otherwise);
  bool Prepare(const std::string& method, const std::string& bucket, const std::string& key,
               const std::map<std::string, std::string>& query, std::map<std::string, std::string> headers,
               const std::string& payload_hash, const Endpoint& endpoint, HttpRequest* request, Credentials* creds,
               std::string* region, Outcome* error);
  CredentialChain credentials_;
  std::mutex mu_;
  std::map<std::string, std::string> bucket_regions_;
};

std::string XmlValue(const std::string& xml, const std::string& path);  // "Error/Code"
std::vector<std::string> XmlValues(const std::string& xml, const std::string& path);

}  // namespace smtrain_s3
