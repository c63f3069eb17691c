"""A Python package index on loopback for the tests that install requirements: wheels made here (pure Python,
one module each), served as a PEP 503 simple index by a real HTTP server; and the environment that makes
pip use it and nothing else of this machine's."""
from __future__ import annotations

import base64
import functools
import hashlib
import http.server
import threading
import zipfile
from pathlib import Path
from typing import Iterator, Mapping

UNREACHABLE = "http://127.0.0.1:9/simple/"  # the discard port: refused at once


def make_wheel(folder: Path, name: str, version: str, module_text: str) -> Path:
    """A pure-Python wheel of `name` whose one module (its name with `_`) holds `module_text`."""
    module = name.replace("-", "_")
    dist = f"{module}-{version}"
    files = {f"{module}.py": module_text.encode(),
             f"{dist}.dist-info/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode(),
             f"{dist}.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    record = "".join(f"{path},sha256={base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b'=').decode()},"
                     f"{len(data)}\n" for path, data in files.items()) + f"{dist}.dist-info/RECORD,,\n"
    wheel = folder / f"{dist}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for path, data in {**files, f"{dist}.dist-info/RECORD": record.encode()}.items():
            archive.writestr(path, data)
    return wheel


class PackageIndex:
    """The wheels in `folder` as a simple index at `url` while the server runs (a context manager)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        for wheel in folder.glob("*.whl"):
            project = folder / "simple" / wheel.name.split("-")[0].replace("_", "-")
            project.mkdir(parents=True, exist_ok=True)
            (project / "index.html").write_text(f'<a href="../../{wheel.name}">{wheel.name}</a>\n')
        handler = functools.partial(_Quiet, directory=str(folder))
        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/simple/"

    def __enter__(self) -> "PackageIndex":
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the base class's name
        pass


def pip_env(index: str, home: Path) -> Mapping[str, str]:
    """pip on `index` alone: no configuration file, links or cache of this machine's; one try, short timeouts."""
    return {"PIP_CONFIG_FILE": "/dev/null", "PIP_INDEX_URL": index, "PIP_FIND_LINKS": "", "PIP_RETRIES": "0",
            "PIP_TIMEOUT": "3", "PIP_DISABLE_PIP_VERSION_CHECK": "1", "HOME": str(home)}


def installed(python: str, names: Iterator[str] | list[str]) -> list[str]:
    """Which of `names` are installed in `python`'s environment."""
    import subprocess

    done = subprocess.run([python, "-m", "pip", "list", "--format=freeze"], capture_output=True, text=True, timeout=60)
    have = {line.split("==")[0].lower() for line in done.stdout.splitlines()}
    return [n for n in names if n.lower() in have]
