"""moto's S3 server (tests/s3/requirements-moto.txt, in /opt/smtrain/moto): a real S3 API for the tests that
need one, on loopback or on the gateway of a Docker network a test made."""
from __future__ import annotations

import os
import socket
import subprocess
import time
import urllib.request
import uuid
from pathlib import Path
from typing import NamedTuple

MOTO_SERVER = Path("/opt/smtrain/moto/bin/moto_server")
KEYS = {"AWS_ACCESS_KEY_ID": "AKIDTESTS3PLUGIN0001", "AWS_SECRET_ACCESS_KEY": "test-secret"}


class S3Server(NamedTuple):
    url: str

    def env(self, **extra: str) -> dict[str, str]:
        """The environment a program talking to this server needs: keys, endpoint, region; no metadata service."""
        base = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "S3_"))}
        return {**base, **KEYS, "AWS_ENDPOINT_URL": self.url, "AWS_REGION": "us-east-1",
                "AWS_EC2_METADATA_DISABLED": "true", **extra}

    def client(self):
        import boto3

        return boto3.client("s3", endpoint_url=self.url, region_name="us-east-1",
                            aws_access_key_id=KEYS["AWS_ACCESS_KEY_ID"], aws_secret_access_key=KEYS["AWS_SECRET_ACCESS_KEY"])

    def new_bucket(self) -> str:
        name = f"b-{uuid.uuid4().hex[:12]}"
        self.client().create_bucket(Bucket=name)
        return name


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as probe:
        probe.bind((host, 0))
        return probe.getsockname()[1]


def start_moto(log: Path, host: str = "127.0.0.1", **env: str) -> tuple[subprocess.Popen, str]:
    """moto's server on `host` (loopback, or the gateway of a Docker network a test made), its URL."""
    port = free_port(host)
    process = subprocess.Popen([str(MOTO_SERVER), "-H", host, "-p", str(port)], stdout=log.open("wb"),
                               stderr=subprocess.STDOUT, env={**os.environ, **env})
    url = f"http://{host}:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(url + "/moto-api/", timeout=2).close()
            return process, url
        except OSError:
            if process.poll() is not None:
                break
            time.sleep(0.2)
    process.kill()
    raise RuntimeError(f"moto's server did not start: {log.read_text()[-2000:]}")
