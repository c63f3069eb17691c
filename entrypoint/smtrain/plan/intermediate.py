"""Whether this host syncs `output/intermediate` to S3 while the job runs, and where to (pure), as
sagemaker-training 5.1.4's `intermediate_output.start_sync` decides it: where the hyperparameter
`sagemaker_s3_output` is set and the folder does not exist yet (where it does, SageMaker itself syncs it),
every file written and closed there goes to `<sagemaker_s3_output>/<TRAINING_JOB_NAME>/output/intermediate/
<relative path>` on every host, with a last pass once the job's success or failure file is written. A
`file://` location needs no sync. The syncer: smtrain.sync.intermediate_output."""
from __future__ import annotations

from pathlib import Path
from typing import Any, NamedTuple, Optional

from ..config.model import TrainingConfig
from ..config.settings import S3_OUTPUT
from ..errors import ConfigError

__all__ = ["IntermediateSync", "intermediate_sync"]


class IntermediateSync(NamedTuple):
    """Where this host's output/intermediate goes."""

    folder: Path
    bucket: str
    prefix: str  # the key prefix: <path>/<TRAINING_JOB_NAME>/output/intermediate
    stop_files: tuple[Path, ...]  # output/success, output/failure: one more pass once either is there

    @property
    def args(self) -> tuple[str, ...]:
        """The syncer's arguments (plan.helper_plan runs it)."""
        return ("--folder", str(self.folder), "--bucket", self.bucket, "--prefix", self.prefix,
                *(a for stop in self.stop_files for a in ("--stop-file", str(stop))))

    def to_json(self) -> dict[str, Any]:
        return {"folder": str(self.folder), "to": f"s3://{self.bucket}/{self.prefix}"}


def intermediate_sync(config: TrainingConfig, folder_exists: bool) -> Optional[IntermediateSync]:
    """The sync this host runs, if any (`folder_exists`: output/intermediate is there when the job starts)."""
    name = S3_OUTPUT.hyperparameter
    location = config.hyperparameters.get(name)
    if not location or folder_exists:
        return None
    location = str(location)
    if location.startswith("file://"):
        return None
    if not location.startswith("s3://"):
        raise ConfigError(f"hyperparameter {name}: expected an s3:// or file:// location, got {location!r}")
    bucket, _, path = location[len("s3://"):].partition("/")
    if not bucket:
        raise ConfigError(f"hyperparameter {name}: {location!r} names no bucket")
    job = config.environ.get("TRAINING_JOB_NAME", "")
    prefix = "/".join(part for part in (path.strip("/"), job, "output", "intermediate") if part)
    paths = config.paths
    return IntermediateSync(paths.output_intermediate_dir, bucket, prefix, (paths.success_file, paths.failure_file))
