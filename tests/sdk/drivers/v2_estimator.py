"""Runs one job with the SageMaker Python SDK v2 in local mode, as its users write it:
`sagemaker.tensorflow.TensorFlow(image_uri=..., distribution=...)` and `fit`. Run by the SDK's own
Python (/opt/smtrain/sdk2), with a JSON spec as its argument (tests/sdk/sdk.py); prints
`SDK-RESULT {"error": ...}` last."""
import json
import sys

spec = json.loads(sys.argv[1])
from sagemaker.inputs import TrainingInput  # noqa: E402
from sagemaker.local import LocalSession  # noqa: E402
from sagemaker.tensorflow import TensorFlow  # noqa: E402

session = LocalSession()
session.config = {"local": {"local_code": True, "container_root": spec["root"]}}
distribution = {"mpi": {"enabled": True, "processes_per_host": spec["processes_per_host"]}} if spec["mpi"] else None
estimator = TensorFlow(
    entry_point=spec["entry_point"], source_dir=spec["source_dir"], image_uri=spec["image"],
    role="arn:aws:iam::111111111111:role/SageMakerRole", instance_count=spec["instance_count"], instance_type="local",
    distribution=distribution, hyperparameters=spec["hyperparameters"], input_mode=spec["input_mode"],
    output_path=f"file://{spec['root']}/artifacts", sagemaker_session=session, base_job_name="smtrain-sdk2",
)
error = None
try:
    estimator.fit({name: TrainingInput(f"file://{path}", input_mode=spec["input_mode"])
                   for name, path in spec["channels"].items()})
except Exception as e:  # what the SDK reports to its user
    error = f"{type(e).__name__}: {e}"
print("SDK-RESULT " + json.dumps({"error": error}), flush=True)
