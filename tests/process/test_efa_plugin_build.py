"""docker/aws-ofi-nccl.sh, the GPU flavour's step that builds NCCL's EFA plugin: no release, nothing built; a release
without its tarball's sha256 refused before anything is downloaded (the download and the check themselves need
GitHub, which this workplace does not reach)."""
from __future__ import annotations

import subprocess
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent.parent.parent / "docker" / "aws-ofi-nccl.sh"


def _run(tmp_path: Path, version: str, sha256: str) -> subprocess.CompletedProcess:
    return subprocess.run(["sh", str(SCRIPT), version, sha256, "/opt/cuda", str(tmp_path / "prefix")],
                          capture_output=True, text=True, timeout=30)


def test_no_release_builds_nothing_and_a_release_needs_its_checksum(tmp_path: Path) -> None:
    none = _run(tmp_path, "", "")
    assert none.returncode == 0 and "not built" in none.stdout
    assert (tmp_path / "prefix" / "lib").is_dir() and not any((tmp_path / "prefix" / "lib").iterdir())
    for bad in ("", "abc", "A" * 64, "0" * 63):
        refused = _run(tmp_path, "1.16.3", bad)
        assert refused.returncode == 2, refused.stderr
        assert "needs AWS_OFI_NCCL_SHA256, the sha256 of aws-ofi-nccl-1.16.3.tar.gz" in refused.stderr
