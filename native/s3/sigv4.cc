#include "sigv4.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>

#include <cstring>
#include <ctime>
#include <vector>

namespace smtrain_s3 {

std::string Hex(const unsigned char* data, size_t n) {
  static const char digits[] = "0123456789abcdef";
  std::string out(2 * n, '0');
  for (size_t i = 0; i < n; ++i) {
    out[2 * i] = digits[data[i] >> 4];
    out[2 * i + 1] = digits[data[i] & 15];
  }
  return out;
}

std::string Sha256Hex(const char* data, size_t n) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(data), n, digest);
  return Hex(digest, sizeof digest);
}

static std::string Hmac(const std::string& key, const std::string& data) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), reinterpret_cast<const unsigned char*>(data.data()),
       data.size(), out, &len);
  return std::string(reinterpret_cast<char*>(out), len);
}

std::string UriEncode(const std::string& s, bool keep_slash) {
  static const char digits[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(s.size() * 3);
  for (unsigned char c : s) {
    if (isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~' || (keep_slash && c == '/')) {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += digits[c >> 4];
      out += digits[c & 15];
    }
  }
  return out;
}

std::string AmzDate(long long unix_seconds) {
  time_t t = static_cast<time_t>(unix_seconds);
  struct tm tm;
  gmtime_r(&t, &tm);
  char buf[32];
  strftime(buf, sizeof buf, "%Y%m%dT%H%M%SZ", &tm);
  return buf;
}

std::string CanonicalQuery(const std::map<std::string, std::string>& query) {
  std::map<std::string, std::string> encoded;
  for (const auto& kv : query) encoded[UriEncode(kv.first, false)] = UriEncode(kv.second, false);
  std::string out;
  for (const auto& kv : encoded) {
    if (!out.empty()) out += '&';
    out += kv.first + "=" + kv.second;
  }
  return out;
}

static std::string Trim(const std::string& v) {
  size_t b = v.find_first_not_of(" \t"), e = v.find_last_not_of(" \t");
  return b == std::string::npos ? "" : v.substr(b, e - b + 1);
}

std::string Sign(const std::string& method, const std::string& path, const std::map<std::string, std::string>& query,
                 std::map<std::string, std::string>& headers, const std::string& payload_hash,
                 const Credentials& creds, const std::string& region, long long unix_seconds) {
  const std::string amz_date = AmzDate(unix_seconds), day = amz_date.substr(0, 8);
  headers["x-amz-date"] = amz_date;
  headers["x-amz-content-sha256"] = payload_hash;
  if (!creds.session_token.empty()) headers["x-amz-security-token"] = creds.session_token;
  std::string canonical_headers, signed_headers;
  for (const auto& kv : headers) {  // std::map: sorted by (lower-case) name
    canonical_headers += kv.first + ":" + Trim(kv.second) + "\n";
    signed_headers += (signed_headers.empty() ? "" : ";") + kv.first;
  }
  const std::string canonical = method + "\n" + path + "\n" + CanonicalQuery(query) + "\n" + canonical_headers +
                                "\n" + signed_headers + "\n" + payload_hash;
  const std::string scope = day + "/" + region + "/s3/aws4_request";
  const std::string to_sign =
      "AWS4-HMAC-SHA256\n" + amz_date + "\n" + scope + "\n" + Sha256Hex(canonical.data(), canonical.size());
  std::string key = Hmac("AWS4" + creds.secret_key, day);
  key = Hmac(Hmac(Hmac(key, region), "s3"), "aws4_request");
  const std::string signature = Hmac(key, to_sign);
  return "AWS4-HMAC-SHA256 Credential=" + creds.access_key + "/" + scope + ", SignedHeaders=" + signed_headers +
         ", Signature=" + Hex(reinterpret_cast<const unsigned char*>(signature.data()), signature.size());
}

}  // namespace smtrain_s3

// For tests: sign one request whose headers come as "name:value\n" lines; returns the Authorization
// value in `out` (size `cap`). Query likewise as "name=value\n" lines, unencoded.
extern "C" int smtrain_s3_sign(const char* method, const char* path, const char* query_lines,
                               const char* header_lines, const char* payload_hash, const char* access_key,
                               const char* secret_key, const char* token, const char* region,
                               long long unix_seconds, char* out, size_t cap) {
  auto split = [](const char* text, char sep) {
    std::map<std::string, std::string> m;
    std::string s(text ? text : "");
    size_t start = 0;
    while (start < s.size()) {
      size_t end = s.find('\n', start);
      if (end == std::string::npos) end = s.size();
      std::string line = s.substr(start, end - start);
      size_t at = line.find(sep);
      if (!line.empty()) m[line.substr(0, at)] = at == std::string::npos ? "" : line.substr(at + 1);
      start = end + 1;
    }
    return m;
  };
  smtrain_s3::Credentials creds{access_key, secret_key, token ? token : "", "test", 0};
  auto headers = split(header_lines, ':');
  std::string auth = smtrain_s3::Sign(method, path, split(query_lines, '='), headers, payload_hash, creds, region,
                                      unix_seconds);
  if (auth.size() + 1 > cap) return -1;
  memcpy(out, auth.c_str(), auth.size() + 1);
  return 0;
}
