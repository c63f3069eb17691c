"""A small tf_keras job on synthetic data: what a user's SageMaker program looks like.

Reads its hyperparameters as arguments and its paths from SM_* variables, prints metric lines that a
SageMaker metric definition matches (e.g. Regex 'loss=([0-9.]+)'), and saves the model in SM_MODEL_DIR.
"""
import argparse
import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tf_keras as keras  # noqa: E402

from smtrain.callbacks import MetricsCallback  # noqa: E402
from smtrain.metrics import log_metrics  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=64)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    x = rng.normal(size=(2048, 16)).astype("float32")
    y = (x @ rng.normal(size=(16, 1))).astype("float32")
    model = keras.Sequential([keras.layers.Dense(32, activation="relu"), keras.layers.Dense(1)])
    model.compile(optimizer="adam", loss="mse")
    callbacks = [MetricsCallback()]
    if os.environ.get("SM_TENSORBOARD_DIR"):  # the job has a TensorBoardOutputConfig: SageMaker uploads it
        callbacks.append(keras.callbacks.TensorBoard(log_dir=os.environ["SM_TENSORBOARD_DIR"]))
    model.fit(x, y, epochs=args.epochs, batch_size=args.batch_size, verbose=0, callbacks=callbacks)
    model.save(os.path.join(os.environ["SM_MODEL_DIR"], "model.keras"))
    log_metrics(final_loss=float(model.evaluate(x, y, verbose=0)))
    print(f"saved the model to {os.environ['SM_MODEL_DIR']} on {os.environ['SM_CURRENT_HOST']}")


if __name__ == "__main__":
    main()
