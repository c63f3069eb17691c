"""Getting the program's code in place before it starts: unpack a tarball (local or `s3://`, the
latter only where boto3 is installed) into the code folder (its requirements: run.pip_install)."""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ..common.console import log
from ..errors import CodeSetupFailed

if TYPE_CHECKING:
    import tarfile

__all__ = ["fetch_code"]


def _download_s3(uri: str, dest: Path) -> None:
    try:
        import boto3  # only for an s3:// submit directory: never on the common launch path
    except ImportError:
        raise CodeSetupFailed(
            f"sagemaker_submit_directory {uri} is on S3, but boto3 is not installed in this image"
        ) from None
    bucket, _, key = uri[len("s3://"):].partition("/")
    try:
        boto3.client("s3").download_file(bucket, key, str(dest))
    except Exception as e:  # botocore raises many unrelated classes; all mean the same here
        raise CodeSetupFailed(f"cannot download sagemaker_submit_directory {uri}: {e}") from None


def fetch_code(source: str, dest: Path) -> None:
    """Unpack the tarball `source` into `dest`, unless `dest` already holds files (as sagemaker-training)."""
    import tarfile  # here, not at the top: off every other job's start (with tempfile, 3 ms)
    import tempfile

    if dest.is_dir() and any(dest.iterdir()):
        log(f"{dest} already holds code; not unpacking {source}")
        return
    dest.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        tarball = Path(source)
        if source.startswith("s3://"):
            tarball = Path(tmp) / "code.tar.gz"
            _download_s3(source, tarball)
        try:
            with tarfile.open(tarball) as archive:
                _extract_safely(archive, dest)
        except (OSError, tarfile.TarError, ValueError) as e:
            raise CodeSetupFailed(f"cannot unpack sagemaker_submit_directory {source} into {dest}: {e}") from None


def _extract_safely(archive: "tarfile.TarFile", dest: Path) -> None:
    """Extract without letting a member escape `dest`: tarfile's "data" filter where this Python has
    it (3.11.4+), else the same checks by hand (Debian 12 ships 3.11.2)."""
    import tarfile

    if hasattr(tarfile, "data_filter"):
        archive.extractall(dest, filter="data")
        return
    root = dest.resolve()
    for member in archive.getmembers():
        target = (dest / member.name).resolve()
        if not (target == root or root in target.parents) or member.issym() or member.islnk() or member.isdev():
            raise ValueError(f"refusing tar member {member.name!r}: outside the folder, a link or a device")
    archive.extractall(dest)
