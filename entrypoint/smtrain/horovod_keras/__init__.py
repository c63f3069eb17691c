"""Horovod's Keras API on Keras 3 (TensorFlow backend). Horovod 0.28.1 serves tf_keras only; the image's
patch of Horovod (scripts/patch-horovod.py) hands what it is given of Keras 3 - an optimizer to wrap,
variables to broadcast - to the modules here, so that `horovod.tensorflow.keras` and `horovod.keras`
take Keras 3 and tf_keras side by side with no setting to change."""

__all__ = ["keras3", "learning_rate", "optimizer", "saving"]
