"""A real S3 API on loopback: moto's server mode (tests/harness/moto.py), started once for these tests.
Nothing inside TensorFlow or the plugin is mocked."""
from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Iterator, NamedTuple

import pytest

from tests.harness.moto import MOTO_SERVER, S3Server, start_moto


@pytest.fixture(scope="session")
def s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    if not MOTO_SERVER.exists():
        pytest.fail(f"{MOTO_SERVER} missing: run scripts/setup.sh")
    process, url = start_moto(tmp_path_factory.mktemp("moto") / "moto.log")
    try:
        yield S3Server(url)
    finally:
        process.kill()
        process.wait()


class CredentialsEndpoint(NamedTuple):
    url: str
    requests: list  # the Authorization header of each request it answered


@pytest.fixture
def credentials_endpoint() -> Iterator[CredentialsEndpoint]:
    """A container credentials endpoint as SageMaker's: JSON with temporary keys, an hour to live."""
    seen: list = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append(self.headers.get("Authorization"))
            expiry = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 3600))
            body = json.dumps({"AccessKeyId": "ASIATESTCONTAINER01", "SecretAccessKey": "container-secret",
                               "Token": "container-session-token", "Expiration": expiry}).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield CredentialsEndpoint(f"http://127.0.0.1:{server.server_address[1]}/v2/credentials/abc", seen)
    finally:
        server.shutdown()


class FlakyFront(NamedTuple):
    url: str
    failed: list  # (method, path) of each request answered 503 SlowDown
    passed: list  # (method, path) of each request handed to the server


@pytest.fixture
def flaky_front(s3: S3Server) -> Iterator:
    """Makes HTTP fronts to moto that answer `SlowDown` (503) to the first `fail` requests of each method,
    then hand requests through: S3's throttling, as a client meets it."""
    import http.client
    from urllib.parse import urlsplit

    target = urlsplit(s3.url)
    def make(fail: int) -> FlakyFront:
        failed: list = []
        passed: list = []
        budget: dict = {}

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _handle(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if budget.setdefault(self.command, fail) > 0:
                    budget[self.command] -= 1
                    failed.append((self.command, self.path))
                    reply = b"<Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>"
                    self.send_response(503)
                    self.send_header("Content-Length", str(len(reply) if self.command != "HEAD" else 0))
                    self.end_headers()
                    if self.command != "HEAD":
                        self.wfile.write(reply)
                    return
                passed.append((self.command, self.path))
                conn = http.client.HTTPConnection(target.hostname, target.port, timeout=60)
                conn.request(self.command, self.path, body=body or None, headers=dict(self.headers))
                answer = conn.getresponse()
                data = answer.read()
                self.send_response(answer.status)
                for name, value in answer.getheaders():
                    if name.lower() not in ("transfer-encoding", "connection", "content-length"):
                        self.send_header(name, value)
                self.send_header("Content-Length", str(answer.getheader("Content-Length", len(data))))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)
                conn.close()

            do_GET = do_PUT = do_POST = do_HEAD = do_DELETE = _handle

            def log_message(self, *args) -> None:
                pass

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return FlakyFront(f"http://127.0.0.1:{server.server_address[1]}", failed, passed)

    servers: list = []
    yield make
    for server in servers:
        server.shutdown()
