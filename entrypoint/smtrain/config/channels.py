"""inputdataconfig.json's channels: each one's input mode, distribution, shuffle seed and Pipe-mode record
format, checked."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Mapping, Optional

from ..errors import ConfigError
from ..wire.record_format import RecordFormat
from .json_fields import expect_object, field
from .model import Channel, InputMode
from .settings import PIPE_RECORD_FORMAT

__all__ = ["CHANNEL_NAME", "channels"]

CHANNEL_NAME = re.compile(r"^[A-Za-z0-9._-]{1,64}$")


def _record_format(name: str, content_type: Optional[str], wrapper: Optional[str], decoded: Mapping[str, Any],
                   hp_path: str) -> RecordFormat:
    """sagemaker_pipe_record_format (one format, or {channel: format}); else RecordIO where SageMaker wraps each
    object in a RecordIO record (RecordWrapperType); else the ContentType; else TFRecord."""
    chosen = decoded.get(PIPE_RECORD_FORMAT.hyperparameter)
    if isinstance(chosen, dict):
        chosen = chosen.get(name)
    if chosen is None and str(wrapper).lower() == "recordio":
        return RecordFormat.RECORDIO
    if chosen is None:
        return RecordFormat.from_content_type(content_type) or RecordFormat.TFRECORD
    try:
        return RecordFormat.parse(str(chosen))
    except ValueError:
        raise ConfigError(
            f"{hp_path}: {PIPE_RECORD_FORMAT.hyperparameter} for channel '{name}' is {chosen!r}; "
            "expected tfrecord, recordio or lines"
        ) from None


def channels(raw: dict, path: Path, decoded: Mapping[str, Any], hp_path: str) -> tuple[Channel, ...]:
    """Every channel of inputdataconfig.json (`raw`, read from `path`), in its order."""
    found = []
    for name, spec in raw.items():
        where = f"{path}: channel '{name}'"
        if not CHANNEL_NAME.match(name):
            raise ConfigError(f"{where}: a channel name must be 1-64 letters, digits, '.', '-' or '_'")
        spec = expect_object(spec, where)
        mode_text = field(spec, "TrainingInputMode", str, where, required=False) or "File"
        mode = next((m for m in InputMode if m.value.lower() == mode_text.lower()), None)
        if mode is None:
            raise ConfigError(
                f"{where}: field 'TrainingInputMode' is {mode_text!r}; expected one of File, Pipe, FastFile"
            )
        shuffle = spec.get("ShuffleConfig")
        seed = None
        if shuffle is not None:
            seed = field(expect_object(shuffle, f"{where}: field 'ShuffleConfig'"), "Seed", int, f"{where}: ShuffleConfig")
        content_type = field(spec, "ContentType", str, where, required=False)
        found.append(
            Channel(
                name=name,
                mode=mode,
                content_type=content_type,
                s3_distribution_type=field(spec, "S3DistributionType", str, where, required=False),
                shuffle_seed=seed,
                record_format=_record_format(name, content_type,
                                             field(spec, "RecordWrapperType", str, where, required=False), decoded,
                                             hp_path),
            )
        )
    return tuple(found)
