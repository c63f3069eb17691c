// AWS Signature Version 4 for S3 requests (checked against botocore's signer in tests/unit/test_s3_sigv4.py).
#pragma once
#include <map>
#include <string>

namespace smtrain_s3 {

struct Credentials {
  std::string access_key, secret_key, session_token;
  std::string source;   // where they came from, for messages ("environment", "container endpoint", ...)
  long long expires = 0;  // unix seconds; 0: never
};

std::string Hex(const unsigned char* data, size_t n);
std::string Sha256Hex(const char* data, size_t n);
// RFC 3986 percent-encoding of everything but unreserved characters (and '/' where keep_slash).
std::string UriEncode(const std::string& s, bool keep_slash);
std::string AmzDate(long long unix_seconds);  // 20261126T213000Z

// Adds x-amz-date (and x-amz-security-token) to `headers` (lower-case names) and returns the
// Authorization header's value. `path` is the encoded path as sent; `query` unencoded names and values.
std::string Sign(const std::string& method, const std::string& path, const std::map<std::string, std::string>& query,
                 std::map<std::string, std::string>& headers, const std::string& payload_hash,
                 const Credentials& creds, const std::string& region, long long unix_seconds);

std::string CanonicalQuery(const std::map<std::string, std::string>& query);

}  // namespace smtrain_s3
