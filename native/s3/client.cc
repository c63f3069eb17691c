#include "client.h"

#include <expat.h>

#include <chrono>
#include <cstdlib>
#include <ctime>
#include <random>
#include <thread>

namespace smtrain_s3 {
namespace {

std::string Env(const char* name) {
  const char* v = getenv(name);
  return v ? v : "";
}

bool Truthy(const std::string& v, bool otherwise) {
  if (v.empty()) return otherwise;
  return !(v == "0" || v == "false" || v == "False" || v == "FALSE" || v == "no");
}

struct XmlCollect {
  std::string path, want, text;
  std::vector<std::string> values;
};

void OnStart(void* user, const XML_Char* name, const XML_Char**) {
  auto* c = static_cast<XmlCollect*>(user);
  c->path += (c->path.empty() ? "" : "/") + std::string(name);
  c->text.clear();
}

void OnEnd(void* user, const XML_Char*) {
  auto* c = static_cast<XmlCollect*>(user);
  if (c->path == c->want) c->values.push_back(c->text);
  size_t at = c->path.rfind('/');
  c->path = at == std::string::npos ? "" : c->path.substr(0, at);
  c->text.clear();
}

void OnText(void* user, const XML_Char* s, int len) { static_cast<XmlCollect*>(user)->text.append(s, len); }

bool Retryable(const HttpResponse& r, const std::string& code) {
  if (r.status == 0) return true;  // no answer: connection refused, reset, timed out
  return r.status >= 500 || r.status == 429 || code == "SlowDown" || code == "RequestTimeout" ||
         code == "RequestTimeTooSkewed" || code == "ExpiredToken" || code == "InternalError";
}

TF_Code CodeFor(long status, const std::string& code) {
  if (code == "NoSuchKey" || code == "NoSuchBucket" || code == "NoSuchUpload" || status == 404) return TF_NOT_FOUND;
  if (code == "InvalidAccessKeyId" || code == "SignatureDoesNotMatch" || code == "ExpiredToken" ||
      code == "InvalidToken")
    return TF_UNAUTHENTICATED;
  if (status == 403) return TF_PERMISSION_DENIED;
  if (status == 416) return TF_OUT_OF_RANGE;
  if (status == 429 || status >= 500) return TF_UNAVAILABLE;
  return TF_FAILED_PRECONDITION;
}

}  // namespace

std::vector<std::string> XmlValues(const std::string& xml, const std::string& path) {
  XmlCollect collect;
  collect.want = path;
  XML_Parser parser = XML_ParserCreate(nullptr);
  XML_SetUserData(parser, &collect);
  XML_SetElementHandler(parser, OnStart, OnEnd);
  XML_SetCharacterDataHandler(parser, OnText);
  XML_Parse(parser, xml.data(), static_cast<int>(xml.size()), 1);
  XML_ParserFree(parser);
  return collect.values;
}

std::string XmlValue(const std::string& xml, const std::string& path) {
  auto values = XmlValues(xml, path);
  return values.empty() ? "" : values.front();
}

Endpoint EndpointFromEnvironment() {
  Endpoint e;
  e.base = Env("AWS_ENDPOINT_URL_S3");
  if (e.base.empty()) e.base = Env("AWS_ENDPOINT_URL");
  if (e.base.empty() && !Env("S3_ENDPOINT").empty()) {  // TensorFlow's former S3 file system's variables
    e.base = Env("S3_ENDPOINT");
    if (e.base.find("://") == std::string::npos)
      e.base = (Truthy(Env("S3_USE_HTTPS"), true) ? "https://" : "http://") + e.base;
  }
  while (!e.base.empty() && e.base.back() == '/') e.base.pop_back();
  e.verify_tls = Truthy(Env("S3_VERIFY_SSL"), true);
  e.region = Env("AWS_REGION");
  if (e.region.empty()) e.region = Env("AWS_DEFAULT_REGION");
  if (e.region.empty()) e.region = "us-east-1";
  int attempts = atoi(Env("AWS_MAX_ATTEMPTS").c_str());
  if (attempts > 0) e.max_attempts = attempts;
  return e;
}

std::string Client::RegionFor(const std::string& bucket, const std::string& otherwise) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = bucket_regions_.find(bucket);
  return it == bucket_regions_.end() ? otherwise : it->second;
}

static std::string UrlFor(const Endpoint& e, const std::string& bucket, const std::string& encoded_key,
                          const std::string& region, std::string* host) {
  if (!e.base.empty()) {  // path style, as S3-compatible servers expect
    std::string rest = e.base.substr(e.base.find("://") + 3);
    *host = rest.substr(0, rest.find('/'));
    return e.base + "/" + UriEncode(bucket, false) + "/" + encoded_key;
  }
  bool dns_safe = bucket.find('.') == std::string::npos && !bucket.empty();
  std::string s3host = "s3." + region + ".amazonaws.com";
  if (dns_safe) {
    *host = bucket + "." + s3host;
    return "https://" + *host + "/" + encoded_key;
  }
  *host = s3host;
  return "https://" + s3host + "/" + UriEncode(bucket, false) + "/" + encoded_key;
}

bool Client::Prepare(const std::string& method, const std::string& bucket, const std::string& key,
                     const std::map<std::string, std::string>& query, std::map<std::string, std::string> headers,
                     const std::string& payload_hash, const Endpoint& endpoint, HttpRequest* request,
                     Credentials* creds, std::string* region, Outcome* error) {
  std::string why;
  if (!credentials_.Get(creds, &why)) {
    error->code = TF_UNAUTHENTICATED;
    error->message = "s3://" + bucket + (key.empty() ? "" : "/" + key) + ": " + why;
    return false;
  }
  *region = RegionFor(bucket, endpoint.region);
  std::string host;
  request->method = method;
  request->url = UrlFor(endpoint, bucket, UriEncode(key, true), *region, &host);
  std::string path = request->url.substr(request->url.find('/', request->url.find("://") + 3));
  if ((method == "PUT" || method == "POST") && headers.count("content-type") == 0)
    headers["content-type"] = "application/octet-stream";
  headers["host"] = host;
  headers["authorization"] =
      Sign(method, path, query, headers, payload_hash, *creds, *region, static_cast<long long>(time(nullptr)));
  headers.erase("host");  // curl sends it
  request->headers = headers;
  std::string q = CanonicalQuery(query);
  if (!q.empty()) request->url += "?" + q;
  request->verify_tls = endpoint.verify_tls;
  return true;
}

bool Client::PrepareGet(const std::string& bucket, const std::string& key, std::map<std::string, std::string> headers,
                        HttpRequest* request, Outcome* error) {
  Credentials creds;
  std::string region;
  return Prepare("GET", bucket, key, {}, std::move(headers), Sha256Hex("", 0), EndpointFromEnvironment(), request,
                 &creds, &region, error);
}

Outcome Client::Call(const std::string& method, const std::string& bucket, const std::string& key,
                     const std::map<std::string, std::string>& query, std::map<std::string, std::string> headers,
                     const char* body, size_t body_size, char* sink, size_t sink_capacity) {
  static thread_local std::mt19937 jitter(std::random_device{}());
  const std::string where = "s3://" + bucket + (key.empty() ? "" : "/" + key);
  Outcome outcome;
  // Every body is hashed into the signature, as botocore does where it sends no checksum header:
  // S3 then rejects a body damaged on the way (SHA-256 runs at about 1.8 GB/s here).
  const Endpoint endpoint = EndpointFromEnvironment();
  const std::string payload_hash = Sha256Hex(body ? body : "", body_size);
  bool region_moved = false;
  for (int attempt = 1;; ++attempt) {
    Credentials creds;
    std::string region;
    HttpRequest request;
    if (!Prepare(method, bucket, key, query, headers, payload_hash, endpoint, &request, &creds, &region, &outcome))
      return outcome;
    request.body = body;
    request.body_size = body_size;
    request.verify_tls = endpoint.verify_tls;
    request.sink = sink;
    request.sink_capacity = sink_capacity;
    outcome.response = Perform(request);
    const HttpResponse& r = outcome.response;
    const std::string error_code = XmlValue(r.body, "Error/Code");  // CopyObject and Complete can fail with 200
    if (r.status >= 200 && r.status < 300 && (error_code.empty() || sink != nullptr)) {
      outcome.code = TF_OK;
      return outcome;
    }
    auto moved = r.headers.find("x-amz-bucket-region");
    if (!region_moved && endpoint.base.empty() && moved != r.headers.end() && moved->second != region &&
        (r.status == 301 || r.status == 400 || r.status == 403)) {
      std::lock_guard<std::mutex> lock(mu_);
      bucket_regions_[bucket] = moved->second;  // the bucket lives elsewhere: S3 said where
      region_moved = true;
      continue;
    }
    if (Retryable(r, error_code) && attempt < endpoint.max_attempts) {
      double cap = std::min(20.0, 0.1 * (1 << std::min(attempt, 8)));
      std::this_thread::sleep_for(std::chrono::duration<double>(std::uniform_real_distribution<>(0, cap)(jitter)));
      continue;
    }
    std::string message = XmlValue(r.body, "Error/Message");
    outcome.code = r.status == 0 ? TF_UNAVAILABLE : CodeFor(r.status, error_code);
    if (r.status == 0) {
      outcome.message = where + ": no answer from S3 (" + r.transport_error + ") after " + std::to_string(attempt) +
                        " attempts";
    } else if (error_code == "NoSuchBucket" || (method == "HEAD" && key.empty() && r.status == 404)) {
      outcome.message = where + ": bucket " + bucket + " does not exist";
    } else if (r.status == 404 && (error_code.empty() || error_code == "NoSuchKey")) {
      outcome.message = where + ": no such key";
    } else {
      outcome.message = where + ": " + method + " answered HTTP " + std::to_string(r.status) +
                        (error_code.empty() ? "" : " " + error_code) + (message.empty() ? "" : ": " + message) +
                        (outcome.code == TF_PERMISSION_DENIED || outcome.code == TF_UNAUTHENTICATED
                             ? " (credentials from " + creds.source + ", key id " + creds.access_key.substr(0, 4) + "...)"
                             : "") +
                        (attempt > 1 ? " (after " + std::to_string(attempt) + " attempts)" : "");
    }
    return outcome;
  }
}

Outcome Client::List(const std::string& bucket, const std::string& prefix, bool one_level, Listing* out,
                     int max_keys) {
  std::map<std::string, std::string> query{{"list-type", "2"}, {"prefix", prefix}};
  if (one_level) query["delimiter"] = "/";
  if (max_keys > 0) query["max-keys"] = std::to_string(max_keys);
  for (;;) {
    Outcome o = Call("GET", bucket, "", query, {});
    if (!o.ok()) return o;
    const std::string& xml = o.response.body;
    for (auto& k : XmlValues(xml, "ListBucketResult/Contents/Key")) out->keys.push_back(k);
    for (auto& s : XmlValues(xml, "ListBucketResult/Contents/Size")) out->sizes.push_back(atoll(s.c_str()));
    for (auto& p : XmlValues(xml, "ListBucketResult/CommonPrefixes/Prefix")) out->prefixes.push_back(p);
    std::string next = XmlValue(xml, "ListBucketResult/NextContinuationToken");
    if (XmlValue(xml, "ListBucketResult/IsTruncated") != "true" || next.empty() || max_keys > 0) return o;
    query["continuation-token"] = next;
  }
}

}  // namespace smtrain_s3
