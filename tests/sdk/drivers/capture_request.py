"""Runs a README example with the SDK it is written for, whole, and keeps the CreateTrainingJob request
that the SDK's own code builds and sends - the request SageMaker would lay out each host from. Run by
the SDK's own Python: `capture_request.py EXAMPLE.py REQUEST.json`; prints `REQUEST-CAPTURED`. What the SDK
uploads to S3 on the way (the code, its drivers) is kept beside REQUEST.json, in `s3/<bucket>/<key>`.

AWS cannot be reached here, so the one stand-in is below the SDK, at botocore's
`BaseClient._make_api_call`: every AWS call is answered there with the least the SDK needs (STS's
caller, IAM's role, S3's bucket, uploads accepted and kept), and CreateTrainingJob is recorded
and ends the example (nothing after it - waiting for the job - can run without SageMaker)."""
import datetime
import json
import os
import sys

import botocore.client

ACCOUNT = "123456789012"


class Captured(Exception):
    """CreateTrainingJob was sent: the request is recorded."""


def answer(self, operation: str, params: dict) -> dict:
    service = self.meta.service_model.service_name
    if service == "sagemaker" and operation == "CreateTrainingJob":
        with open(sys.argv[2], "w") as f:
            json.dump(params, f, default=str, indent=1, sort_keys=True)
        raise Captured()
    if operation == "GetCallerIdentity":
        return {"Account": ACCOUNT, "Arn": f"arn:aws:iam::{ACCOUNT}:user/example", "UserId": "EXAMPLE"}
    if operation == "GetRole":
        return {"Role": {"Arn": f"arn:aws:iam::{ACCOUNT}:role/{params['RoleName']}", "RoleName": params["RoleName"],
                         "Path": "/", "RoleId": "AROAEXAMPLE", "CreateDate": datetime.datetime(2026, 1, 1)}}
    if operation == "ListBuckets":
        return {"Buckets": [{"Name": f"sagemaker-us-east-1-{ACCOUNT}", "CreationDate": datetime.datetime(2026, 1, 1)}]}
    if operation == "ListObjectsV2":
        return {"Contents": [], "KeyCount": 0, "IsTruncated": False}
    if operation == "GetBucketLocation":
        return {"LocationConstraint": None}
    if operation == "PutObject":
        body = params.get("Body", b"")
        kept = os.path.join(os.path.dirname(os.path.abspath(sys.argv[2])), "s3", params["Bucket"], params["Key"])
        os.makedirs(os.path.dirname(kept), exist_ok=True)
        with open(kept, "wb") as f:
            f.write(body.read() if hasattr(body, "read") else body if isinstance(body, bytes) else str(body).encode())
        return {"ETag": '"0123456789abcdef0123456789abcdef"'}
    if operation == "UploadPart":
        raise SystemExit("a multipart upload: the example's code is larger than this stand-in keeps")
    if operation == "CreateMultipartUpload":
        return {"UploadId": "example", "Bucket": params["Bucket"], "Key": params["Key"]}
    return {}  # HeadBucket, CreateBucket, CompleteMultipartUpload, tags...: accepted


botocore.client.BaseClient._make_api_call = answer
source = open(sys.argv[1]).read()
try:
    exec(compile(source, sys.argv[1], "exec"), {"__name__": "__main__"})
except Captured:
    print("REQUEST-CAPTURED", flush=True)
else:
    raise SystemExit("the example ended without sending CreateTrainingJob")
