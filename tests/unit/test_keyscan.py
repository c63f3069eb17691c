"""The image tier's private-key scanner (tests/harness/keyscan.py) on keys made by ssh-keygen and OpenSSL's
PEM form, hidden as they could be in an image's layer: plain, across a chunk's end, in a wheel, in a
tarball, compressed, nested - and not fooled by text that only names the marker."""
from __future__ import annotations

import bz2
import gzip
import io
import lzma
import subprocess
import tarfile
import zipfile
from pathlib import Path

from tests.harness import keyscan
from tests.harness.keyscan import find_keys


def _key(tmp_path: Path, kind: str = "ed25519", form: str = "RFC4716") -> bytes:
    key = tmp_path / f"{kind}-{form}"
    subprocess.run(["ssh-keygen", "-q", "-t", kind, "-N", "", "-m", form, "-f", str(key)], check=True,
                   capture_output=True, timeout=60)
    return key.read_bytes()


def _tar(files: dict[str, bytes]) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


def _zip(files: dict[str, bytes], method: int = zipfile.ZIP_DEFLATED) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", method) as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return out.getvalue()


def test_keys_are_found_wherever_a_layer_hides_them(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(keyscan, "CHUNK", 4096)  # small chunks: a key across a chunk's end is still found
    ed25519, rsa_pem = _key(tmp_path), _key(tmp_path, "rsa", "PEM")
    assert ed25519.startswith(b"-----BEGIN OPENSSH PRIVATE KEY-----")
    assert rsa_pem.startswith(b"-----BEGIN RSA PRIVATE KEY-----")
    wheel = _zip({"pkg/__init__.py": b"", "pkg/tests/server.key": rsa_pem})
    layer = _tar({
        "usr/lib/python3/ssl.py": b'MARKER = "-----BEGIN PRIVATE KEY-----"  # code naming the marker\n' * 50,
        "usr/share/doc/ssh.txt": b"Look for -----BEGIN OPENSSH PRIVATE KEY----- then -----END OPENSSH PRIVATE KEY-----",
        "root/.ssh/id_ed25519": ed25519,
        "opt/straddle.bin": b"x" * 4000 + ed25519 + b"y" * 5000,
        "opt/wheels/pkg-1.0-py3-none-any.whl": wheel,
        "opt/stored.zip": _zip({"key": ed25519}, zipfile.ZIP_STORED),
        "opt/backup.tar.gz": gzip.compress(_tar({"etc/ssh/ssh_host_ed25519_key": ed25519})),
        "opt/key.bz2": bz2.compress(rsa_pem),
        "opt/nested.tar.xz": lzma.compress(_tar({"inner.tgz": gzip.compress(_tar({"deep/key": ed25519}))})),
        "opt/nothing.gz": gzip.compress(b"no key here " * 1000),
    })
    found = sorted(f.path for f in find_keys(io.BytesIO(layer)))
    assert found == sorted([
        "root/.ssh/id_ed25519", "opt/straddle.bin", "opt/wheels/pkg-1.0-py3-none-any.whl!pkg/tests/server.key",
        "opt/stored.zip!key", "opt/backup.tar.gz!etc/ssh/ssh_host_ed25519_key", "opt/key.bz2",
        "opt/nested.tar.xz!inner.tgz!deep/key",
    ])
    assert find_keys(io.BytesIO(gzip.compress(layer)))  # a compressed layer, as some `docker save` formats have


def test_a_broken_archive_is_said_not_skipped(tmp_path: Path) -> None:
    broken = gzip.compress(b"fine so far " * 100)[:-20] + b"garbage"
    found = [f.path for f in find_keys(io.BytesIO(_tar({"opt/broken.gz": broken})))]
    assert len(found) == 1 and found[0].startswith("opt/broken.gz (unreadable gzip"), found
