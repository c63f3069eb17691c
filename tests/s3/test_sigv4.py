"""The plugin's Signature V4 against botocore's signer (the reference) on the same requests."""
from __future__ import annotations

import ctypes
import hashlib
from unittest import mock
from datetime import datetime, timezone

import pytest
from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from smtrain.s3 import plugin_path

WHEN = 1795730000  # a fixed moment, as botocore's signer is given


@pytest.fixture(scope="module")
def sign():
    import tensorflow  # noqa: F401  - the plugin links against TensorFlow's framework library

    lib = ctypes.CDLL(str(plugin_path()))
    fn = lib.smtrain_s3_sign
    fn.restype = ctypes.c_int

    def call(method, path, query, headers, payload_hash, token, region="eu-west-1"):
        out = ctypes.create_string_buffer(1024)
        lines = lambda d, sep: "".join(f"{k}{sep}{v}\n" for k, v in d.items()).encode()  # noqa: E731
        rc = fn(method.encode(), path.encode(), lines(query, "="), lines(headers, ":"), payload_hash.encode(),
                b"AKIDEXAMPLE", b"wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", token.encode() if token else None,
                region.encode(), ctypes.c_longlong(WHEN), out, ctypes.c_size_t(len(out)))
        assert rc == 0
        return out.value.decode()

    return call


def _botocore(method, url, headers, body, token, region="eu-west-1") -> str:
    request = AWSRequest(method=method, url=url, headers=dict(headers), data=body)
    signer = S3SigV4Auth(Credentials("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", token), "s3", region)
    moment = datetime.fromtimestamp(WHEN, timezone.utc).replace(tzinfo=None)
    with mock.patch("botocore.auth.get_current_datetime", return_value=moment):
        signer.add_auth(request)
    return request.headers["Authorization"]


CASES = [
    ("GET", "/bucket/dir/model.ckpt-100.index", {}, {"range": "bytes=0-8388607"}, b"", None),
    ("GET", "/bucket/", {"list-type": "2", "prefix": "a b/c+d=é/", "delimiter": "/",
                         "continuation-token": "1/AbC+dEf=="}, {}, b"", "session-token/+="),
    ("PUT", "/bucket/k%20with%20spaces/%C3%A9t%C3%A9%2B1.tfrecord", {"partNumber": "3", "uploadId": "x~y.z_"},
     {"content-type": "application/octet-stream"}, b"a part of a TFRecord file \x00\xff", None),
    ("POST", "/bucket/key", {"uploads": ""}, {"content-type": "application/xml"}, b"", "tok"),
    ("PUT", "/bucket/dst", {}, {"x-amz-copy-source": "/bucket/src%20key"}, b"", None),
    ("HEAD", "/bucket/key", {}, {}, b"", None),
]


@pytest.mark.parametrize("method,path,query,headers,body,token", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_the_authorization_header_is_botocores(sign, method, path, query, headers, body, token) -> None:
    """The plugin hashes every body into the signature, as botocore does where no checksum header is sent."""
    from urllib.parse import quote

    host = "s3.eu-west-1.amazonaws.com"
    ours = sign(method, path, query, {"host": host, **headers}, hashlib.sha256(body).hexdigest(), token)
    qs = "&".join(f"{quote(k, safe='-_.~')}={quote(v, safe='-_.~')}" for k, v in sorted(query.items()))
    url = f"https://{host}{path}" + (f"?{qs}" if qs else "")
    assert ours == _botocore(method, url, headers, body, token)
