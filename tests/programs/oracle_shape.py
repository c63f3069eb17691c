"""What sagemaker-training 5.1.4 decides for this host (its trainer.train and runner.get, run up to the
runner, which is not started): the runner, the master, the distribution's hosts, the mpirun command on
the master, and the program's variables. Prints them as JSON; reads the tree of $SAGEMAKER_BASE_DIR."""
import json

from sagemaker_training import environment, mpi, params, runner

env = environment.Environment()
wants_mpi = env.additional_framework_parameters.get(params.MPI_ENABLED)
kind = (runner.RunnerType.MPI if wants_mpi and env.current_instance_group in env.distribution_instance_groups
        else runner.RunnerType.Process)
chosen = runner.get(kind, env.user_entry_point, env.to_cmd_args(), env.to_env_vars())
print(json.dumps({
    "runner": type(chosen).__name__,
    "master": env.master_hostname,
    "distribution_hosts": env.distribution_hosts,
    "command": chosen._create_command() if isinstance(chosen, mpi.MasterRunner) else None,
    "env": env.to_env_vars(),
}))
