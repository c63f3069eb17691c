"""Runs one job with the SageMaker Python SDK v3's ModelTrainer in local container mode, as v3's
documentation writes a Horovod job: `SourceCode(source_dir=..., entry_script=...)`,
`Compute(instance_count=...)`, `distributed=MPI(process_count_per_node=...)`. Run by the SDK's own
Python (/opt/smtrain/sdk3), with a JSON spec as its argument (tests/sdk/sdk.py); prints
`SDK-RESULT {"error": ...}` last."""
import json
import sys

spec = json.loads(sys.argv[1])
from sagemaker.core.training.configs import Compute, InputData, SourceCode  # noqa: E402
from sagemaker.train.distributed import MPI  # noqa: E402
from sagemaker.train.model_trainer import Mode, ModelTrainer  # noqa: E402

trainer = ModelTrainer(
    training_image=spec["image"], training_mode=Mode.LOCAL_CONTAINER, local_container_root=spec["root"],
    source_code=SourceCode(source_dir=spec["source_dir"], entry_script=spec["entry_point"]),
    compute=Compute(instance_type="local_cpu", instance_count=spec["instance_count"]),
    distributed=MPI(process_count_per_node=spec["processes_per_host"]) if spec["mpi"] else None,
    hyperparameters=spec["hyperparameters"], training_input_mode=spec["input_mode"], base_job_name="smtrain-sdk3",
)
error = None
try:
    trainer.train(input_data_config=[InputData(channel_name=name, data_source=path)
                                     for name, path in spec["channels"].items()], wait=True)
except Exception as e:  # what the SDK reports to its user
    error = f"{type(e).__name__}: {e}"
print("SDK-RESULT " + json.dumps({"error": error}), flush=True)
