#include "credentials.h"

#include <nlohmann/json.hpp>

#include <cstdlib>
#include <ctime>
#include <fstream>
#include <sstream>

#include "http.h"

namespace smtrain_s3 {
namespace {

std::string Env(const char* name) {
  const char* v = getenv(name);
  return v ? v : "";
}

long long ParseIso8601(const std::string& s) {  // 2026-11-26T22:00:00Z
  struct tm tm = {};
  if (strptime(s.c_str(), "%Y-%m-%dT%H:%M:%S", &tm) == nullptr) return 0;
  return static_cast<long long>(timegm(&tm));
}

bool FromJson(const std::string& body, const std::string& source, Credentials* out, std::string* why) {
  auto doc = nlohmann::json::parse(body, nullptr, false);
  if (doc.is_discarded() || !doc.is_object() || !doc.contains("AccessKeyId") || !doc.contains("SecretAccessKey")) {
    *why += source + " answered without AccessKeyId/SecretAccessKey; ";
    return false;
  }
  out->access_key = doc["AccessKeyId"].get<std::string>();
  out->secret_key = doc["SecretAccessKey"].get<std::string>();
  out->session_token = doc.value("Token", "");
  out->expires = doc.contains("Expiration") ? ParseIso8601(doc["Expiration"].get<std::string>()) : 0;
  out->source = source;
  return true;
}

}  // namespace

bool CredentialChain::Get(Credentials* out, std::string* why) {
  std::lock_guard<std::mutex> lock(mu_);
  const long long now = static_cast<long long>(time(nullptr));
  if (have_ && (cached_.expires == 0 || cached_.expires - now > 300)) {
    *out = cached_;
    return true;
  }
  Credentials fresh;
  std::string tried;
  bool ok = FromEnvironment(&fresh) || FromContainer(&fresh, &tried) || FromInstanceMetadata(&fresh, &tried);
  if (!ok) {
    if (have_ && cached_.expires > now) {  // refresh failed, but what we hold is still valid
      *out = cached_;
      return true;
    }
    *why = "no AWS credentials: none in the environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY); " + tried;
    return false;
  }
  cached_ = fresh;
  have_ = true;
  *out = fresh;
  return true;
}

bool CredentialChain::FromEnvironment(Credentials* out) {
  std::string key = Env("AWS_ACCESS_KEY_ID"), secret = Env("AWS_SECRET_ACCESS_KEY");
  if (key.empty() || secret.empty()) return false;
  *out = Credentials{key, secret, Env("AWS_SESSION_TOKEN"), "the environment", 0};
  return true;
}

bool CredentialChain::FromContainer(Credentials* out, std::string* why) {
  std::string relative = Env("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI"), full = Env("AWS_CONTAINER_CREDENTIALS_FULL_URI");
  if (relative.empty() && full.empty()) {
    *why += "no container credentials endpoint (AWS_CONTAINER_CREDENTIALS_RELATIVE_URI/_FULL_URI); ";
    return false;
  }
  HttpRequest request;
  request.url = relative.empty() ? full : "http://169.254.170.2" + relative;
  std::string token = Env("AWS_CONTAINER_AUTHORIZATION_TOKEN");
  std::string token_file = Env("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE");
  if (!token_file.empty()) {
    std::ifstream in(token_file);
    std::stringstream text;
    text << in.rdbuf();
    token = text.str();
    while (!token.empty() && (token.back() == '\n' || token.back() == '\r')) token.pop_back();
  }
  if (!token.empty() && relative.empty()) request.headers["authorization"] = token;
  request.connect_timeout_ms = 2000;
  request.total_timeout_ms = 5000;
  const std::string source = "the container credentials endpoint";
  for (int attempt = 0; attempt < 3; ++attempt) {
    HttpResponse response = Perform(request);
    if (response.status == 200) return FromJson(response.body, source, out, why);
    if (response.status >= 400 && response.status < 500) {
      *why += source + " answered HTTP " + std::to_string(response.status) + "; ";
      return false;
    }
    if (attempt == 2) {
      *why += source + " did not answer (" +
              (response.status ? "HTTP " + std::to_string(response.status) : response.transport_error) + "); ";
    }
  }
  return false;
}

bool CredentialChain::FromInstanceMetadata(Credentials* out, std::string* why) {
  std::string disabled = Env("AWS_EC2_METADATA_DISABLED");
  if (disabled == "true" || disabled == "TRUE" || disabled == "1") {
    *why += "instance metadata disabled (AWS_EC2_METADATA_DISABLED)";
    return false;
  }
  std::string base = Env("AWS_EC2_METADATA_SERVICE_ENDPOINT");
  if (base.empty()) base = "http://169.254.169.254";
  while (!base.empty() && base.back() == '/') base.pop_back();
  HttpRequest request;
  request.connect_timeout_ms = 1000;
  request.total_timeout_ms = 2000;
  request.method = "PUT";
  request.url = base + "/latest/api/token";
  request.headers["x-aws-ec2-metadata-token-ttl-seconds"] = "21600";
  HttpResponse token = Perform(request);
  if (token.status != 200) {
    *why += "instance metadata at " + base + " did not answer (" +
            (token.status ? "HTTP " + std::to_string(token.status) : token.transport_error) + ")";
    return false;
  }
  request.method = "GET";
  request.headers.clear();
  request.headers["x-aws-ec2-metadata-token"] = token.body;
  request.url = base + "/latest/meta-data/iam/security-credentials/";
  HttpResponse role = Perform(request);
  std::string name = role.body.substr(0, role.body.find('\n'));
  if (role.status != 200 || name.empty()) {
    *why += "instance metadata has no IAM role";
    return false;
  }
  request.url += name;
  HttpResponse creds = Perform(request);
  if (creds.status != 200) {
    *why += "instance metadata gave no credentials for role " + name;
    return false;
  }
  return FromJson(creds.body, "instance metadata", out, why);
}

}  // namespace smtrain_s3
