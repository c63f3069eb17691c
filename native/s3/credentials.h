// AWS credentials, resolved as AWS SDKs do: environment keys, then the container credentials endpoint
// (AWS_CONTAINER_CREDENTIALS_RELATIVE_URI / _FULL_URI, as SageMaker and ECS give), then the instance
// metadata service (IMDSv2). Temporary credentials are fetched again 5 minutes before they expire.
#pragma once
#include <mutex>
#include <string>

#include "sigv4.h"

namespace smtrain_s3 {

class CredentialChain {
 public:
  // false with `why` naming every source tried when none gave credentials.
  bool Get(Credentials* out, std::string* why);

 private:
  bool FromEnvironment(Credentials* out);
  bool FromContainer(Credentials* out, std::string* why);
  bool FromInstanceMetadata(Credentials* out, std::string* why);
  std::mutex mu_;
  Credentials cached_;
  bool have_ = false;
};

}  // namespace smtrain_s3
