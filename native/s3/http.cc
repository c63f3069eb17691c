#include "http.h"

#include <curl/curl.h>

#include <algorithm>
#include <cstring>
#include <mutex>

namespace smtrain_s3 {
namespace {

struct Exchange {
  CURL* curl;
  HttpResponse* response;
  const HttpRequest* request;
};

size_t OnHeader(char* data, size_t size, size_t count, void* user) {
  auto* x = static_cast<Exchange*>(user);
  std::string line(data, size * count);
  size_t colon = line.find(':');
  if (line.rfind("HTTP/", 0) == 0) x->response->headers.clear();  // a 100-continue or redirect before the answer
  if (colon != std::string::npos) {
    std::string name = line.substr(0, colon), value = line.substr(colon + 1);
    std::transform(name.begin(), name.end(), name.begin(), ::tolower);
    size_t b = value.find_first_not_of(" \t"), e = value.find_last_not_of(" \t\r\n");
    x->response->headers[name] = b == std::string::npos ? "" : value.substr(b, e - b + 1);
  }
  return size * count;
}

size_t OnBody(char* data, size_t size, size_t count, void* user) {
  auto* x = static_cast<Exchange*>(user);
  size_t n = size * count;
  long status = 0;
  curl_easy_getinfo(x->curl, CURLINFO_RESPONSE_CODE, &status);
  if (x->request->sink != nullptr && status >= 200 && status < 300) {
    size_t room = x->request->sink_capacity - x->response->sink_bytes;
    if (n > room) return 0;  // more than asked for: abort the transfer
    memcpy(x->request->sink + x->response->sink_bytes, data, n);
    x->response->sink_bytes += n;
  } else {
    x->response->body.append(data, n);
  }
  return n;
}

CURL* ThreadHandle() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
  struct Holder {
    CURL* curl = curl_easy_init();
    ~Holder() { curl_easy_cleanup(curl); }
  };
  thread_local Holder holder;
  return holder.curl;
}

}  // namespace

HttpResponse Perform(const HttpRequest& request) {
  HttpResponse response;
  CURL* curl = ThreadHandle();
  curl_easy_reset(curl);  // keeps the connection cache
  Exchange x{curl, &response, &request};
  curl_slist* headers = nullptr;
  for (const auto& kv : request.headers) headers = curl_slist_append(headers, (kv.first + ": " + kv.second).c_str());
  headers = curl_slist_append(headers, "Expect:");  // no 100-continue round trip
  headers = curl_slist_append(headers, "Accept:");
  curl_easy_setopt(curl, CURLOPT_URL, request.url.c_str());
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, OnHeader);
  curl_easy_setopt(curl, CURLOPT_HEADERDATA, &x);
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, OnBody);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &x);
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, request.connect_timeout_ms);
  if (request.total_timeout_ms > 0) curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, request.total_timeout_ms);
  curl_easy_setopt(curl, CURLOPT_LOW_SPEED_LIMIT, 1L);  // a stalled transfer fails (and is retried)
  curl_easy_setopt(curl, CURLOPT_LOW_SPEED_TIME, 60L);
  curl_easy_setopt(curl, CURLOPT_SSL_VERIFYPEER, request.verify_tls ? 1L : 0L);
  curl_easy_setopt(curl, CURLOPT_SSL_VERIFYHOST, request.verify_tls ? 2L : 0L);
  curl_easy_setopt(curl, CURLOPT_BUFFERSIZE, 512L * 1024);
  if (request.method == "HEAD") {
    curl_easy_setopt(curl, CURLOPT_NOBODY, 1L);
  } else if (request.method == "GET") {
    curl_easy_setopt(curl, CURLOPT_HTTPGET, 1L);
  } else {
    curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, request.method.c_str());
    if (request.method == "PUT" || request.method == "POST") {
      curl_easy_setopt(curl, CURLOPT_POSTFIELDS, request.body ? request.body : "");
      curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(request.body_size));
    }
  }
  CURLcode rc = curl_easy_perform(curl);
  curl_slist_free_all(headers);
  if (rc != CURLE_OK) {
    response.status = 0;
    response.transport_error = curl_easy_strerror(rc);
  } else {
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &response.status);
  }
  return response;
}

}  // namespace smtrain_s3
