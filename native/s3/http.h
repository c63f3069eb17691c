// One HTTP exchange over libcurl, with a connection kept per thread (keep-alive across requests).
#pragma once
#include <map>
#include <string>

namespace smtrain_s3 {

struct HttpRequest {
  std::string method = "GET";
  std::string url;
  std::map<std::string, std::string> headers;
  const char* body = nullptr;
  size_t body_size = 0;
  bool verify_tls = true;
  long connect_timeout_ms = 10000;
  long total_timeout_ms = 0;  // 0: none (a stall is caught by the low-speed limit)
  char* sink = nullptr;       // a 2xx body goes here (up to sink_capacity) instead of into HttpResponse::body
  size_t sink_capacity = 0;
};

struct HttpResponse {
  long status = 0;  // 0: no answer (transport_error says why)
  std::string transport_error;
  std::map<std::string, std::string> headers;  // lower-case names
  std::string body;
  size_t sink_bytes = 0;
};

HttpResponse Perform(const HttpRequest& request);

// One GET whose body is taken as the caller asks for it: the transfer pauses between reads (curl's
// multi interface, driven in the caller's thread), so a sequential reader costs one request.
class HttpStream {
 public:
  explicit HttpStream(const HttpRequest& request);
  ~HttpStream();
  HttpStream(const HttpStream&) = delete;
  HttpStream& operator=(const HttpStream&) = delete;
  // Up to n bytes; fewer only at the end of the body or on failure (then `failed()`).
  size_t Read(char* dst, size_t n);
  bool failed() const { return failed_; }
  const std::string& why() const { return why_; }

 private:
  static size_t OnData(char* data, size_t size, size_t count, void* user);
  void* easy_ = nullptr;
  void* multi_ = nullptr;
  void* headers_ = nullptr;
  char* dst_ = nullptr;
  size_t room_ = 0, got_ = 0;
  std::string spill_;  // the part of curl's last chunk that did not fit the caller's buffer
  std::string error_body_;
  bool paused_ = false, done_ = false, failed_ = false;
  std::string why_;
};

}  // namespace smtrain_s3
