"""SageMaker training entry point for TensorFlow + Horovod containers."""
