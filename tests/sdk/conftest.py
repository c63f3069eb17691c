"""The SDK tests run the image under test (built once per session, tests/conftest.py) through the
real SDKs; each test's containers are removed after it. The SageMaker stand-in's tests share one S3 (moto's
server) on the jobs' Docker network."""
from __future__ import annotations

from typing import Iterator

import pytest

from tests.harness.docker_cluster import docker
from tests.harness.moto import KEYS, start_moto
from tests.harness.sagemaker import NETWORK, SDK_BUCKET, USER_BUCKET, S3Store, SageMakerS3
from tests.sdk.sdk import remove_containers


@pytest.fixture(scope="session")
def s3_on_the_network(image: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SageMakerS3]:
    import boto3

    docker("network", "rm", NETWORK, check=False)
    docker("network", "create", NETWORK)
    process = None
    try:
        gateway = docker("network", "inspect", "-f", "{{(index .IPAM.Config 0).Gateway}}", NETWORK).stdout.strip()
        process, url = start_moto(tmp_path_factory.mktemp("moto") / "moto.log", host=gateway)
        client = boto3.client("s3", endpoint_url=url, region_name="us-east-1", aws_access_key_id=KEYS["AWS_ACCESS_KEY_ID"],
                              aws_secret_access_key=KEYS["AWS_SECRET_ACCESS_KEY"])
        for bucket in (USER_BUCKET, SDK_BUCKET):
            client.create_bucket(Bucket=bucket)
        yield SageMakerS3(url, S3Store(client))
    finally:
        if process:
            process.kill()
            process.wait()
        docker("network", "rm", NETWORK, check=False)


@pytest.fixture
def containers(image: str) -> Iterator[str]:
    remove_containers(image)
    yield image
    remove_containers(image)
