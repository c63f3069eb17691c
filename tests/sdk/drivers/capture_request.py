"""Runs a README example with the SDK it is written for, whole, and keeps the CreateTrainingJob request
that the SDK's own code builds and sends - the request SageMaker would lay out each host from. Run by
the SDK's own Python in a network namespace of its own: `capture_request.py EXAMPLE.py REQUEST.json`;
prints `REQUEST-CAPTURED`.

Every S3 call the SDK makes goes to a real S3 API: moto's server (tests/harness/moto.py), started here on the
namespace's loopback. What the SDK put there (the code, its drivers) is then copied beside REQUEST.json,
in `s3/<bucket>/<key>`. AWS itself cannot be reached, so below the SDK, at botocore's
`BaseClient._make_api_call`, the other services' calls are answered with the least the SDK needs (STS's
caller, IAM's role and its permission to write the SDK's bucket); CreateTrainingJob is recorded and ends the
example (nothing after it - waiting for the job - can run without SageMaker); a call of any other service or
operation ends the run as a failure."""
import datetime
import json
import os
import subprocess
import sys
from pathlib import Path

import boto3
import botocore.client

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))  # the repository: its tests' harness
from tests.harness.moto import start_moto  # noqa: E402

ACCOUNT = "123456789012"
SENDS = botocore.client.BaseClient._make_api_call


class Captured(Exception):
    """CreateTrainingJob was sent: the request is recorded."""


def answer(self, operation: str, params: dict) -> dict:
    service = self.meta.service_model.service_name
    if service == "s3":
        return SENDS(self, operation, params)
    if service == "sagemaker" and operation == "CreateTrainingJob":
        with open(sys.argv[2], "w") as f:
            json.dump(params, f, default=str, indent=1, sort_keys=True)
        raise Captured()
    if operation == "GetCallerIdentity":
        return {"Account": ACCOUNT, "Arn": f"arn:aws:iam::{ACCOUNT}:user/example", "UserId": "EXAMPLE"}
    if operation == "GetRole":
        return {"Role": {"Arn": f"arn:aws:iam::{ACCOUNT}:role/{params['RoleName']}", "RoleName": params["RoleName"],
                         "Path": "/", "RoleId": "AROAEXAMPLE", "CreateDate": datetime.datetime(2026, 1, 1)}}
    if operation == "SimulatePrincipalPolicy":  # SDK v3: may the role write to the default bucket? (it may)
        return {"EvaluationResults": [{"EvalActionName": action, "EvalResourceName": resource, "EvalDecision": "allowed"}
                                      for action in params["ActionNames"] for resource in params.get("ResourceArns", ["*"])],
                "IsTruncated": False}
    raise SystemExit(f"capture_request: an AWS call this stand-in does not answer: {service} {operation}")


def start_s3() -> subprocess.Popen:
    """moto's server on this namespace's loopback, once it answers (tests/harness/moto.py)."""
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    server, os.environ["AWS_ENDPOINT_URL_S3"] = start_moto(Path(os.path.abspath(sys.argv[2])).parent / "moto.log")
    return server


def keep_uploads(folder: str) -> None:
    """Every object in the S3 server, copied to `folder/<bucket>/<key>`."""
    s3 = boto3.client("s3", region_name="us-east-1")
    for bucket in s3.list_buckets()["Buckets"]:
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket["Name"]):
            for item in page.get("Contents", []):
                kept = os.path.join(folder, bucket["Name"], item["Key"])
                os.makedirs(os.path.dirname(kept), exist_ok=True)
                s3.download_file(bucket["Name"], item["Key"], kept)


server = start_s3()
try:
    botocore.client.BaseClient._make_api_call = answer
    source = open(sys.argv[1]).read()
    try:
        exec(compile(source, sys.argv[1], "exec"), {"__name__": "__main__"})
    except Captured:
        keep_uploads(os.path.join(os.path.dirname(os.path.abspath(sys.argv[2])), "s3"))
        print("REQUEST-CAPTURED", flush=True)
    else:
        raise SystemExit("the example ended without sending CreateTrainingJob")
finally:
    server.kill()
    server.wait()
