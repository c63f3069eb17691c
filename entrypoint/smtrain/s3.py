"""s3:// for TensorFlow in this image: every Python program that imports TensorFlow from the image's
environment has it (a library in site-packages/tensorflow-plugins/ registers the plugin that
scripts/build-native.sh builds from native/s3/). `register()` is for a TensorFlow that does not load
that folder - another environment using this image's plugin, say. Set SMTRAIN_S3_FILESYSTEM=off to leave
s3:// to another plugin."""
from __future__ import annotations

from pathlib import Path

from .data.libs import library_dir

__all__ = ["PLUGIN_NAME", "plugin_path", "register"]

PLUGIN_NAME = "s3_filesystem.so"


def plugin_path() -> Path:
    """The s3:// file system plugin's library."""
    return library_dir() / PLUGIN_NAME


def register() -> bool:
    """Register s3:// with TensorFlow; False when it was already registered."""
    import tensorflow as tf

    try:
        tf.experimental.register_filesystem_plugin(str(plugin_path()))
    except tf.errors.AlreadyExistsError:
        return False
    except tf.errors.OpError as error:  # TensorFlow names an already registered scheme with other codes too
        if "already registered" in str(error):
            return False
        raise
    return True
