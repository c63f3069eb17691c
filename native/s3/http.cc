#include "http.h"

#include <curl/curl.h>

#include <algorithm>
#include <chrono>
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

// What every request sets alike: URL, headers, timeouts, TLS checks. Returns the header list to free.
curl_slist* Configure(CURL* curl, const HttpRequest& request) {
  curl_slist* headers = nullptr;
  for (const auto& kv : request.headers) headers = curl_slist_append(headers, (kv.first + ": " + kv.second).c_str());
  headers = curl_slist_append(headers, "Expect:");  // no 100-continue round trip
  headers = curl_slist_append(headers, "Accept:");
  curl_easy_setopt(curl, CURLOPT_URL, request.url.c_str());
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, request.connect_timeout_ms);
  curl_easy_setopt(curl, CURLOPT_SSL_VERIFYPEER, request.verify_tls ? 1L : 0L);
  curl_easy_setopt(curl, CURLOPT_SSL_VERIFYHOST, request.verify_tls ? 2L : 0L);
  curl_easy_setopt(curl, CURLOPT_BUFFERSIZE, 512L * 1024);
  return headers;
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
  curl_slist* headers = Configure(curl, request);
  curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, OnHeader);
  curl_easy_setopt(curl, CURLOPT_HEADERDATA, &x);
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, OnBody);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &x);
  if (request.total_timeout_ms > 0) curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, request.total_timeout_ms);
  curl_easy_setopt(curl, CURLOPT_LOW_SPEED_LIMIT, 1L);  // a stalled transfer fails (and is retried)
  curl_easy_setopt(curl, CURLOPT_LOW_SPEED_TIME, 60L);
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

HttpStream::HttpStream(const HttpRequest& request) {
  CURL* curl = curl_easy_init();
  easy_ = curl;
  headers_ = Configure(curl, request);
  curl_easy_setopt(curl, CURLOPT_HTTPGET, 1L);
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, OnData);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, this);
  CURLM* multi = curl_multi_init();
  multi_ = multi;
  curl_multi_add_handle(multi, curl);
}

HttpStream::~HttpStream() {
  curl_multi_remove_handle(static_cast<CURLM*>(multi_), static_cast<CURL*>(easy_));
  curl_easy_cleanup(static_cast<CURL*>(easy_));
  curl_multi_cleanup(static_cast<CURLM*>(multi_));
  curl_slist_free_all(static_cast<curl_slist*>(headers_));
}

size_t HttpStream::OnData(char* data, size_t size, size_t count, void* user) {
  auto* s = static_cast<HttpStream*>(user);
  size_t n = size * count;
  long status = 0;
  curl_easy_getinfo(static_cast<CURL*>(s->easy_), CURLINFO_RESPONSE_CODE, &status);
  if (status < 200 || status >= 300) {
    s->error_body_.append(data, n);
    return n;
  }
  if (s->dst_ == nullptr || s->got_ == s->room_) {  // the caller has what it asked for: wait for the next read
    s->paused_ = true;
    return CURL_WRITEFUNC_PAUSE;
  }
  size_t take = std::min(n, s->room_ - s->got_);
  memcpy(s->dst_ + s->got_, data, take);
  s->got_ += take;
  s->spill_.append(data + take, n - take);
  return n;
}

size_t HttpStream::Read(char* dst, size_t n) {
  if (failed_) return 0;
  size_t from_spill = std::min(n, spill_.size());
  memcpy(dst, spill_.data(), from_spill);
  spill_.erase(0, from_spill);
  dst_ = dst;
  room_ = n;
  got_ = from_spill;
  CURLM* multi = static_cast<CURLM*>(multi_);
  if (paused_ && got_ < room_) {
    paused_ = false;
    curl_easy_pause(static_cast<CURL*>(easy_), CURLPAUSE_CONT);  // hands over the held chunk at once
  }
  auto last_progress = std::chrono::steady_clock::now();
  while (got_ < room_ && !done_) {
    size_t before = got_;
    int running = 0;
    curl_multi_perform(multi, &running);
    int queued = 0;
    while (CURLMsg* msg = curl_multi_info_read(multi, &queued)) {
      if (msg->msg != CURLMSG_DONE) continue;
      done_ = true;
      long status = 0;
      curl_easy_getinfo(static_cast<CURL*>(easy_), CURLINFO_RESPONSE_CODE, &status);
      if (msg->data.result != CURLE_OK) {
        failed_ = true;
        why_ = curl_easy_strerror(msg->data.result);
      } else if (status < 200 || status >= 300) {
        failed_ = true;
        why_ = "HTTP " + std::to_string(status) + " " + error_body_.substr(0, 300);
      }
    }
    if (got_ != before) last_progress = std::chrono::steady_clock::now();
    if (got_ >= room_ || done_ || paused_) break;
    if (std::chrono::steady_clock::now() - last_progress > std::chrono::seconds(60)) {  // stalled
      failed_ = true;
      why_ = "no data for 60 s";
      break;
    }
    curl_multi_poll(multi, nullptr, 0, 1000, nullptr);
  }
  dst_ = nullptr;
  return got_;
}

}  // namespace smtrain_s3
