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

}  // namespace smtrain_s3
