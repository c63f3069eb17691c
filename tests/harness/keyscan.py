"""Private keys anywhere in an image, every layer of it: `docker save` streamed through Python, each layer's
files read, and archives inside them opened (tar, zip - wheels too - gzip, bzip2, xz, nested), so that a
key written in one build step and deleted in a later one, or shipped inside a wheel or a tarball, is found.

A private key here is a whole PEM or OpenSSH block: its BEGIN line, base64 (PEM headers allowed), its END
line - not code or documentation that only names the marker.

    python -m tests.harness.keyscan IMAGE     # prints each key found as `layer <i>: <path>`; exit 1 if any
"""
from __future__ import annotations

import bz2
import gzip
import io
import json
import lzma
import re
import subprocess
import sys
import tarfile
import zipfile
from typing import BinaryIO, Callable, NamedTuple, Optional

__all__ = ["Finding", "find_keys", "scan_image"]

KEY = re.compile(rb"-----BEGIN (?:[A-Z0-9]+ )?PRIVATE KEY-----\s*(?:[A-Za-z-]+: [^\n]*\n\s*)*"
                 rb"[A-Za-z0-9+/=\s]{40,}-----END (?:[A-Z0-9]+ )?PRIVATE KEY-----")
MARKER = b"PRIVATE KEY-----"
CHUNK = 4 << 20
OVERLAP = 32 << 10  # longer than any key block (an RSA-8192 PEM key is ~6.4 KiB)
ZIP_IN_MEMORY = 512 << 20  # a zip needs random access: read whole up to this size, else scanned as bytes
MAX_DEPTH = 6

_DECOMPRESS: dict[str, Callable[[BinaryIO], BinaryIO]] = {
    "gzip": lambda f: gzip.GzipFile(fileobj=f),  # type: ignore[dict-item]
    "bzip2": lambda f: bz2.BZ2File(f),  # type: ignore[dict-item]
    "xz": lambda f: lzma.LZMAFile(f),  # type: ignore[dict-item]
}


class Finding(NamedTuple):
    path: str  # inside the scanned stream; `!` steps into an archive's member


class _Prefixed(io.RawIOBase):
    """A stream whose first bytes were already read (to tell its kind), given back before the rest."""

    def __init__(self, head: bytes, rest: BinaryIO) -> None:
        self.head, self.rest = head, rest

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:  # type: ignore[no-untyped-def]
        if self.head:
            n = min(len(buffer), len(self.head))
            buffer[:n], self.head = self.head[:n], self.head[n:]
            return n
        data = self.rest.read(len(buffer))
        buffer[:len(data)] = data
        return len(data)


def _kind(head: bytes) -> Optional[str]:
    if head[257:262] == b"ustar":
        return "tar"
    if head.startswith(b"PK\x03\x04"):
        return "zip"
    if head.startswith(b"\x1f\x8b"):
        return "gzip"
    if head.startswith(b"BZh"):
        return "bzip2"
    if head.startswith(b"\xfd7zXZ\x00"):
        return "xz"
    return None


def _holds_key(stream: BinaryIO) -> bool:
    """Whether the bytes of `stream` hold a key, read in chunks (a key across a chunk's end is still seen)."""
    tail = b""
    while True:
        chunk = stream.read(CHUNK)
        if not chunk:
            return False
        window = tail + chunk
        if MARKER in window and KEY.search(window):
            return True
        tail = window[-OVERLAP:]


def find_keys(stream: BinaryIO, path: str = "", depth: int = 0) -> list[Finding]:
    """Every key in `stream` (read once, to its end), archives opened down to MAX_DEPTH levels. An
    archive that cannot be opened is scanned as bytes as far as it was read, and said as `unreadable`."""
    head = stream.read(512)
    kind = _kind(head) if depth < MAX_DEPTH else None
    whole = io.BufferedReader(_Prefixed(head, stream), CHUNK)
    if kind == "tar":
        found: list[Finding] = []
        try:
            with tarfile.open(fileobj=whole, mode="r|") as tar:
                for member in tar:
                    if member.isfile():
                        name = member.name.removeprefix("./")
                        found += find_keys(tar.extractfile(member), f"{path}!{name}" if path else name, depth + 1)
            return found
        except tarfile.TarError as e:
            return found + [Finding(f"{path} (unreadable tar: {e})")]
    if kind == "zip":
        data = whole.read(ZIP_IN_MEMORY + 1)
        if len(data) > ZIP_IN_MEMORY:  # too large to open here: its bytes, stored members' keys among them
            return [Finding(path)] if _holds_key(io.BytesIO(data)) or _holds_key(whole) else []
        found = []
        try:
            with zipfile.ZipFile(io.BytesIO(data)) as archive:
                for info in archive.infolist():
                    if not info.is_dir():
                        with archive.open(info) as member:
                            found += find_keys(member, f"{path}!{info.filename}", depth + 1)
        except (zipfile.BadZipFile, OSError, EOFError, NotImplementedError, lzma.LZMAError) as e:
            found.append(Finding(f"{path} (unreadable zip: {e})"))
            if _holds_key(io.BytesIO(data)):
                found.append(Finding(path))
        return found
    if kind in _DECOMPRESS:
        try:
            return find_keys(_DECOMPRESS[kind](whole), path, depth + 1)  # the same file, decompressed
        except (OSError, EOFError, lzma.LZMAError) as e:
            return [Finding(f"{path} (unreadable {kind}: {e})")]
    return [Finding(path)] if _holds_key(whole) else []


def scan_image(image: str, timeout: float = 900) -> dict[int, list[str]]:
    """Keys (and unreadable archives) in each layer of `image`, by the layer's index (0: the base's first),
    from `docker save`; {} when there is none."""
    save = subprocess.Popen(["docker", "save", image], stdout=subprocess.PIPE)
    assert save.stdout is not None
    by_member: dict[str, list[str]] = {}
    manifest: list = []
    try:
        with tarfile.open(fileobj=save.stdout, mode="r|") as outer:
            for member in outer:
                if not member.isfile():
                    continue
                content = outer.extractfile(member)
                if member.name == "manifest.json":
                    manifest = json.load(content)
                    continue
                found = find_keys(content, "")
                if found:
                    by_member[member.name] = [f.path for f in found]
    finally:
        save.stdout.close()
        if save.wait(timeout) != 0:
            raise RuntimeError(f"docker save {image} failed with status {save.returncode}")
    layers = manifest[0]["Layers"]
    unplaced = set(by_member) - set(layers)
    if unplaced:  # a key in the image's config or another non-layer file
        raise AssertionError(f"keys outside the layers of {image}: { {m: by_member[m] for m in unplaced} }")
    return {i: by_member[name] for i, name in enumerate(layers) if name in by_member}


def main(argv: list[str]) -> int:
    found = scan_image(argv[0])
    for layer, paths in sorted(found.items()):
        for path in paths:
            print(f"layer {layer}: {path}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
