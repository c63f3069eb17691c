"""plan_launch for the master and worker roles (pure: real config files in a tmp tree, no process)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from smtrain.config.load import load_config
from smtrain.config.model import CodeFacts, HostFacts
from smtrain.errors import ConfigError
from smtrain.plan.helper_plan import MONITOR
from smtrain.plan.launch import LaunchPlan, Role, dumps, plan_launch
from smtrain.plan.mpirun_command import MpirunSpec
from smtrain.wire.pipe_assignment import PipeMode
from smtrain.wire.contract import RANK_CONTRACT_ENV, RankContract
from tests.harness.plans import FACTS, MPI
from tests.support import make_tree

HOSTS = ("algo-1", "algo-2")
PIPE = {"train": {"TrainingInputMode": "Pipe"}}


def _plan(tmp_path: Path, current: str, facts: HostFacts = FACTS, instance_type: str = "", **env: str):
    extra = {"current_instance_type": instance_type} if instance_type else None
    tree = make_tree(tmp_path, hosts=HOSTS, current_host=current, hyperparameters=MPI, channels=PIPE, resource_extra=extra)
    config = load_config(tree.env(SMTRAIN_SSHD_PORT="2222", SM_CONTROL_PORT="7100", **env))
    return plan_launch(config, facts, "/venv/bin/python", token="t" * 32)


def test_master_runs_mpirun_with_the_rank_launcher_and_one_contract(tmp_path: Path) -> None:
    plan = _plan(tmp_path, "algo-1", SMTRAIN_SOMETHING="internal")
    assert plan.role is Role.MASTER and plan.argv[0] == "mpirun"
    assert "--host" in plan.argv and plan.argv[plan.argv.index("--host") + 1] == "localhost:2,algo-2:2"
    assert plan.argv[plan.argv.index("-np") + 1] == "4"
    launcher = plan.argv.index("smtrain.rank")
    assert plan.argv[launcher - 1:launcher + 2] == ("-m", "smtrain.rank", "--")
    assert plan.argv[launcher + 2:launcher + 4] == ("/venv/bin/python", str(tmp_path / "code" / "train.py"))
    # the contract travels by name only, as the user's own SMTRAIN_* settings do; an inherited contract is replaced
    env = plan.child_env({"SMTRAIN_SOMETHING": "x", RANK_CONTRACT_ENV: "stale", "PATH": "/bin"})
    assert env["SMTRAIN_SOMETHING"] == "x" and env[RANK_CONTRACT_ENV] == plan.env_set[RANK_CONTRACT_ENV]
    exported = [plan.argv[i + 1] for i, a in enumerate(plan.argv) if a == "-x"]
    assert RANK_CONTRACT_ENV in exported and "SMTRAIN_SOMETHING" in exported
    assert not any("t" * 32 in a for a in plan.argv)  # the token is on no command line
    contract = RankContract.from_json(plan.env_set[RANK_CONTRACT_ENV])
    assert (contract.control_host, contract.control_port, contract.token) == ("algo-1", 7100, "t" * 32)
    assert [(p.channel, p.mode) for p in contract.pipes] == [("train", PipeMode.DEMUX)]
    assert contract.output  # the ranks' output goes to the master's train in whole lines (run.rank_output)
    assert RankContract.from_json(contract.to_json()) == contract
    assert plan.coordination is not None and plan.coordination.control_bind == "0.0.0.0"
    starter = plan.coordination.starter
    assert isinstance(starter, MpirunSpec) and starter.sshd is None  # the master serves no sshd
    # the master's train makes the job's key in /run/smtrain/ssh, where mpirun's ssh finds it (docker/ssh_config)
    assert starter.ssh_dir == "/run/smtrain/ssh"
    assert len(plan.demux) == 1 and plan.helper(MONITOR) is not None
    assert plan.argv[plan.argv.index("--bind-to") + 1] == "none"  # CPUs the ranks may use: unknown


def test_the_system_monitor_gets_the_live_metrics_interval_and_the_masters_control_port(tmp_path: Path) -> None:
    def after(plan: LaunchPlan, flag: str) -> str:
        monitor = plan.helper(MONITOR)
        assert monitor is not None
        return monitor.argv[monitor.argv.index(flag) + 1]

    worker = _plan(tmp_path / "a", "algo-2", SMTRAIN_LIVE_METRICS_INTERVAL_S="1.5")
    assert (after(worker, "--live-s"), after(worker, "--control")) == ("1.5", "algo-1:7100")
    assert after(_plan(tmp_path / "b", "algo-1"), "--live-s") == "5"


def test_where_restarts_are_asked_for_every_mpirun_shares_the_masters_held_ssh_connections(tmp_path: Path) -> None:
    def mca(argv: tuple[str, ...]) -> dict[str, str]:
        return {argv[i + 1]: argv[i + 2] for i, a in enumerate(argv) if a == "--mca"}

    def held(plan: LaunchPlan) -> tuple[str, ...]:
        assert plan.coordination is not None and isinstance(plan.coordination.starter, MpirunSpec)
        return plan.coordination.starter.held

    plan = _plan(tmp_path / "a", "algo-1", SMTRAIN_MAX_RESTARTS="1")
    assert held(plan) == ("algo-2",)
    assert mca(plan.argv)["plm_rsh_args"] == "-oControlPath=/run/smtrain/ssh/mux-%n"
    assert json.loads(dumps(plan))["coordination"]["starter"]["held"] == ["algo-2"]
    assert held(_plan(tmp_path / "b", "algo-2", SMTRAIN_MAX_RESTARTS="1")) == ()
    plan = _plan(tmp_path / "c", "algo-1")  # no restarts: mpirun logs into the workers itself, as ever
    assert held(plan) == () and "plm_rsh_args" not in mca(plan.argv)


def test_ranks_are_bound_to_the_cpus_this_host_lets_the_program_use(tmp_path: Path) -> None:
    plan = _plan(tmp_path, "algo-1", FACTS._replace(bindable_cpus=6))
    assert plan.argv[plan.argv.index("--bind-to") + 1] == "none"  # no instance type: maybe not a host of its own
    plan = _plan(tmp_path / "ml", "algo-1", FACTS._replace(bindable_cpus=6), instance_type="ml.c5.2xlarge")
    assert plan.argv[plan.argv.index("--map-by") + 1] == "slot:PE=3"
    plan = _plan(tmp_path / "gpu", "algo-1", FACTS._replace(bindable_cpus=6, num_gpus=2), instance_type="ml.g5.12xlarge")
    assert plan.argv[plan.argv.index("--bind-to") + 1] == "none"


def test_worker_starts_sshd_as_planned_and_runs_no_program_itself(tmp_path: Path) -> None:
    plan = _plan(tmp_path, "algo-2", SMTRAIN_SSHD_CONFIG="/etc/smtrain/sshd_config")
    assert plan.role is Role.WORKER and plan.argv == ()
    coordination = plan.coordination
    assert coordination is not None
    starter = coordination.starter  # the master's mpirun starts this host's ranks
    assert isinstance(starter, MpirunSpec) and starter.sshd is not None
    # the container's own host key; the one key it accepts is the job's, which the master gives it
    assert starter.sshd.argv == ("/usr/sbin/sshd", "-D", "-e", "-f", "/etc/smtrain/sshd_config", "-p", "2222",
                                 "-h", "/run/smtrain/ssh/host_ed25519_key",
                                 "-o", "AuthorizedKeysFile=/run/smtrain/ssh/authorized_keys")
    assert starter.sshd.port == 2222 and starter.ssh_dir == "/run/smtrain/ssh"
    assert coordination.master == "algo-1" and coordination.control_port == 7100
    assert len(plan.demux) == 1  # this host's ranks read the channel through its own demultiplexer
    shown = json.loads(dumps(plan))
    assert shown["role"] == "worker" and shown["coordination"]["starter"]["sshd"] == {"argv": list(starter.sshd.argv), "port": 2222}


def test_the_dry_run_plan_masks_secret_values(tmp_path: Path) -> None:
    from smtrain.config.secrets import Redactor

    plan = _plan(tmp_path, "algo-1")
    config = load_config(make_tree(tmp_path / "x", hyperparameters=MPI).env())
    text = dumps(plan, Redactor.of(config.hyperparameters))
    assert "hunter22" not in text and "****" in text
    assert "hunter22" in plan.env_set["SM_HP_DB_PASSWORD"]  # the program still gets it


def test_a_tarball_is_planned_from_the_gathered_facts(tmp_path: Path) -> None:
    tarball = FACTS._replace(code=CodeFacts(submit_is_file=True, has_requirements=False))
    plan = _plan(tmp_path, "algo-1", tarball, SAGEMAKER_SUBMIT_DIRECTORY=str(tmp_path / "code.tar.gz"))
    assert plan.program.fetch_from == str(tmp_path / "code.tar.gz")
    assert plan.requirements.file == tmp_path / "code" / "requirements.txt"  # checked once unpacked


@pytest.mark.parametrize("name,value", [("SMTRAIN_SSHD_PORT", "22x"), ("SMTRAIN_SSHD_PORT", "70000"),
                                        ("SMTRAIN_SSHD_CONFIG", "relative/sshd_config"), ("SM_CONTROL_PORT", "0")])
def test_bad_toolkit_variables_are_config_errors_naming_them(tmp_path: Path, name: str, value: str) -> None:
    tree = make_tree(tmp_path, hosts=HOSTS, hyperparameters=MPI)
    with pytest.raises(ConfigError, match=name):  # on every host of an MPI job, when its plan is made
        plan_launch(load_config(tree.env(**{name: value})), FACTS, "/venv/bin/python", token="t" * 32)


def test_heartbeat_timeout_is_read_and_bounded(tmp_path: Path) -> None:
    plan = _plan(tmp_path, "algo-1", SM_HEARTBEAT_TIMEOUT_SECONDS="25")
    assert plan.coordination is not None and plan.coordination.heartbeat_timeout_s == 25
    with pytest.raises(ConfigError, match=r"sagemaker_heartbeat_timeout_seconds \(or SM_HEARTBEAT_TIMEOUT_SECONDS\) must be a number of seconds >= 3 \(heartbeats go every 1 s\), got 1"):
        load_config(make_tree(tmp_path / "x", hyperparameters={"sagemaker_heartbeat_timeout_seconds": "1"}).env())


def test_cpu_ranks_split_the_cores_and_yield_them_in_mpi_unless_told_otherwise() -> None:
    from smtrain.plan.mpirun_command import WAITING_YIELDS
    from smtrain.rank.launcher import cpu_share

    cpu = {"SM_LOCAL_SIZE": "4", "SM_NUM_GPUS": "0"}
    assert cpu_share(cpu, 16, WAITING_YIELDS) == {"OMP_NUM_THREADS": "4", "TF_NUM_INTRAOP_THREADS": "4",
                                                  "TF_NUM_INTEROP_THREADS": "4", "OMPI_MCA_mpi_yield_when_idle": "1"}
    assert cpu_share({**cpu, "OMP_NUM_THREADS": "8", "OMPI_MCA_mpi_yield_when_idle": "0"}, 16, WAITING_YIELDS) == {
        "TF_NUM_INTRAOP_THREADS": "4", "TF_NUM_INTEROP_THREADS": "4"}
    assert cpu_share({"SM_LOCAL_SIZE": "3", "SM_NUM_GPUS": "0"}, 2)["OMP_NUM_THREADS"] == "1"
    assert cpu_share({"SM_LOCAL_SIZE": "8", "SM_NUM_GPUS": "8"}, 96, WAITING_YIELDS) == {}  # GPU ranks: left alone
    assert cpu_share({"SM_LOCAL_SIZE": "1", "SM_NUM_GPUS": "0"}, 16, WAITING_YIELDS) == {}  # one rank: TF's defaults


def test_a_rank_learns_who_it_is_from_its_starters_variables_as_the_contract_names_them(tmp_path: Path) -> None:
    """The MPI kind's contract names Open MPI's variables (plan.mpirun_command); a TF strategy's names none (its
    `rank` says it): the rank launcher knows no starter's variables of its own."""
    from smtrain.rank.launcher import rank_env

    mpi = RankContract.from_json(_plan(tmp_path / "mpi", "algo-1").env_set[RANK_CONTRACT_ENV])
    given = {"OMPI_COMM_WORLD_RANK": "3", "OMPI_COMM_WORLD_SIZE": "4", "OMPI_COMM_WORLD_LOCAL_RANK": "1",
             "OMPI_COMM_WORLD_LOCAL_SIZE": "2", "SM_NUM_GPUS": "0"}
    env = rank_env(given, mpi)
    assert (env["SM_RANK"], env["SM_SIZE"], env["SM_LOCAL_RANK"], env["SM_LOCAL_SIZE"]) == ("3", "4", "1", "2")
    assert env["OMPI_MCA_mpi_yield_when_idle"] == "1"
    strategy = _strategy_plan(tmp_path / "tf", {"sagemaker_multi_worker_mirrored_strategy_enabled": "true"}, "algo-1")
    assert strategy.coordination is not None and strategy.coordination.contract is not None
    assert strategy.coordination.contract.identity == () and "SM_RANK" not in rank_env(given, strategy.coordination.contract)


def _strategy_plan(tmp_path: Path, hyperparameters: dict, current: str, hosts=("algo-1", "algo-2", "algo-3")):
    tree = make_tree(tmp_path, hosts=hosts, current_host=current, hyperparameters=hyperparameters)
    return plan_launch(load_config(tree.env(SM_CONTROL_PORT="7100")), FACTS, "/venv/bin/python", token="t" * 32)


def test_parameter_server_job_roles_tasks_and_the_ps_beside_each_program(tmp_path: Path) -> None:
    ps = {"sagemaker_parameter_server_enabled": "true"}
    master = _strategy_plan(tmp_path / "m", ps, "algo-1")
    worker = _strategy_plan(tmp_path / "w", ps, "algo-3")
    assert (master.role, worker.role) == (Role.MASTER, Role.WORKER)
    for plan in (master, worker):
        coordination = plan.coordination
        assert coordination is not None and coordination.contract is not None and coordination.contract.token == ""
        assert plan.argv[:4] == ("/venv/bin/python", "-m", "smtrain.rank", "--")  # under the rank launcher
        (ps_here,) = coordination.companions
        assert ps_here.argv[:4] == plan.argv[:4] and ps_here.argv[-2:] == ("-m", "smtrain.run.tfserver")
        assert RANK_CONTRACT_ENV not in plan.env_set  # the token comes with the job's start, not the plan
        assert coordination.ranks == (("algo-1", 0), ("algo-2", 1), ("algo-3", 2))  # the programs, not the servers
    program = str(master.program.program_path)
    assert master.coordination.rank_names == {
        0: f"{program} (TF_CONFIG task master 0 on host algo-1)", 1: f"{program} (TF_CONFIG task worker 0 on host algo-2)",
        2: f"{program} (TF_CONFIG task worker 1 on host algo-3)",
        3: "the parameter server (TF_CONFIG task ps 0 on host algo-1)",
        4: "the parameter server (TF_CONFIG task ps 1 on host algo-2)",
        5: "the parameter server (TF_CONFIG task ps 2 on host algo-3)"}
    assert json.loads(worker.env_set["TF_CONFIG"])["task"] == {"index": 1, "type": "worker"}
    (ps_here,) = worker.coordination.companions
    assert json.loads(ps_here.env_set["TF_CONFIG"])["task"] == {"index": 2, "type": "ps"} and ps_here.rank == 5
    assert worker.coordination.program_rank == 2
    assert worker.coordination.program_name == f"{worker.program.program_path} (TF_CONFIG task worker 1 on host algo-3)"
    assert json.loads(dumps(master))["coordination"]["companions"][0]["describe"] == "TF_CONFIG task ps 0 on host algo-1"


def test_strategies_on_one_host_run_alone_mwms_with_tf_config(tmp_path: Path) -> None:
    mwms = _strategy_plan(tmp_path / "a", {"sagemaker_multi_worker_mirrored_strategy_enabled": "true"}, "algo-1",
                          hosts=("algo-1",))
    ps = _strategy_plan(tmp_path / "b", {"sagemaker_parameter_server_enabled": "true"}, "algo-1", hosts=("algo-1",))
    assert mwms.role is Role.SINGLE and ps.role is Role.SINGLE and mwms.coordination is None
    assert json.loads(mwms.env_set["TF_CONFIG"])["cluster"] == {"worker": ["algo-1:8890"]}
    assert "TF_CONFIG" not in ps.env_set  # as the container: parameter servers need two hosts
    assert mwms.env_set["S3_USE_HTTPS"] == "1" and mwms.env_set["TF_CPP_MIN_LOG_LEVEL"] == "1"


def test_tuning_jobs_get_their_own_model_dir(tmp_path: Path) -> None:
    tree = make_tree(tmp_path, hyperparameters={"_tuning_objective_metric": '"loss"', "model_dir": '"s3://b/p"'})
    plan = plan_launch(load_config(tree.env(TRAINING_JOB_NAME="tj-3")), FACTS, "/venv/bin/python")
    assert plan.argv[-2:] == ("--model_dir", "s3://b/p/tj-3/model")
    assert plan.env_set["SM_HP_MODEL_DIR"] == "s3://b/p/tj-3/model"


def test_ranks_get_horovods_stall_inspector_interval_unless_the_user_set_one(tmp_path) -> None:
    from smtrain.wire.contract import RankContract
    from smtrain.rank.launcher import rank_env

    contract = RankContract("algo-1", 7077, "t", 110.0, (), stall_timeout_s=20)
    base = {"SAGEMAKER_BASE_DIR": str(tmp_path)}
    assert rank_env(base, contract)["HOROVOD_STALL_CHECK_TIME_SECONDS"] == "3"
    assert rank_env({**base, "HOROVOD_STALL_CHECK_TIME_SECONDS": "30"}, contract)["HOROVOD_STALL_CHECK_TIME_SECONDS"] == "30"
    assert "HOROVOD_STALL_CHECK_TIME_SECONDS" not in rank_env(base, contract._replace(stall_timeout_s=0))
    assert RankContract.from_json(contract.to_json()) == contract


def test_each_rank_learns_its_channels_mode_and_shuffle_flag_from_the_plan(tmp_path: Path) -> None:
    """The Pipe API reads SM_PIPE_MODE_<C> and SM_PIPE_SHUFFLED_<C>: the plan's, carried in the contract."""
    from smtrain.rank.launcher import rank_env

    channels = {"train": {"TrainingInputMode": "Pipe", "ShuffleConfig": {"Seed": 3}},
                "eval": {"TrainingInputMode": "Pipe"}}
    tree = make_tree(tmp_path, hosts=HOSTS, current_host="algo-1", hyperparameters=MPI, channels=channels)
    plan = plan_launch(load_config(tree.env(SM_CONTROL_PORT="7100")), FACTS, "/venv/bin/python", token="t" * 32)
    contract = RankContract.from_json(plan.env_set[RANK_CONTRACT_ENV])
    assert {(a.channel, a.mode, a.shuffled) for a in contract.pipes} == {
        ("train", PipeMode.DEMUX, True), ("eval", PipeMode.DEMUX, False)}
    env = rank_env({"SAGEMAKER_BASE_DIR": str(tmp_path), "OMPI_COMM_WORLD_LOCAL_RANK": "1"}, contract)
    assert (env["SM_PIPE_MODE_TRAIN"], env["SM_PIPE_SHUFFLED_TRAIN"], env["SM_PIPE_SHUFFLED_EVAL"]) == ("demux", "1", "0")
    assert env["SM_PIPE_TRAIN"].endswith("train-1") and env["SM_PIPE_FORMAT_TRAIN"] == "tfrecord"
    alone = _strategy_plan(tmp_path / "one", {}, "algo-1", hosts=("algo-1",))
    assert json.loads(dumps(alone))["distribution"] == "single"


def test_a_gpu_job_across_hosts_says_once_that_nccl_uses_sockets_where_the_image_has_no_efa_plugin(
        tmp_path: Path) -> None:
    from smtrain.config.hostfacts import network_facts

    gpus = FACTS._replace(num_gpus=8)
    note = "NCCL will use sockets between hosts: this image has no aws-ofi-nccl (NCCL's EFA plugin)"
    def nccl(notes) -> list[str]:  # the job's Pipe channel has a note of its own
        return [n for n in notes if "NCCL" in n]

    assert nccl(_plan(tmp_path / "a", "algo-1", gpus).notes) == [note]
    assert nccl(json.loads(dumps(_plan(tmp_path / "b", "algo-2", gpus)))["notes"]) == [note]
    plugin = gpus._replace(network=gpus.network._replace(nccl_net_plugin=True))
    assert nccl(_plan(tmp_path / "c", "algo-1", plugin).notes) == [] and nccl(_plan(tmp_path / "d", "algo-1").notes) == []
    (tmp_path / "lib").mkdir()
    assert not network_facts(library_path=f"/nonexistent:{tmp_path / 'lib'}").nccl_net_plugin
    (tmp_path / "lib" / "libnccl-net.so").write_bytes(b"")
    assert network_facts(library_path=f"/nonexistent:{tmp_path / 'lib'}").nccl_net_plugin


def _objects(value: object, path: str = "plan") -> list[str]:
    """Every value inside `value` that is not data: data is a string, number, bool, None, path or enum, or a
    tuple (a named tuple too), list or mapping of data."""
    import enum
    from collections.abc import Mapping
    from pathlib import PurePath

    if value is None or isinstance(value, (str, int, float, bool, PurePath, enum.Enum)):
        return []
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        return [o for name in value._fields for o in _objects(getattr(value, name), f"{path}.{name}")]
    if isinstance(value, (tuple, list)):
        return [o for i, item in enumerate(value) for o in _objects(item, f"{path}[{i}]")]
    if isinstance(value, Mapping):
        return [o for key, item in value.items() for o in _objects(item, f"{path}[{key!r}]")]
    return [f"{path}: {type(value).__name__}"]


@pytest.mark.parametrize("hyperparameters,hosts,current", [
    ({}, ("algo-1",), "algo-1"),
    ({**MPI, "sagemaker_max_restarts": "1"}, HOSTS, "algo-1"),
    ({**MPI, "sagemaker_max_restarts": "1"}, HOSTS, "algo-2"),
    ({"sagemaker_parameter_server_enabled": "true"}, HOSTS, "algo-2"),
    ({"sagemaker_multi_worker_mirrored_strategy_enabled": "true", "sagemaker_max_restarts": "1"}, HOSTS, "algo-1"),
])
def test_the_plan_holds_data_only_no_object_that_starts_a_process(tmp_path: Path, hyperparameters: dict,
                                                                   hosts: tuple, current: str) -> None:
    tree = make_tree(tmp_path, hosts=hosts, current_host=current, hyperparameters=hyperparameters, channels=PIPE)
    plan = plan_launch(load_config(tree.env()), FACTS, "/venv/bin/python", token="t" * 32)
    assert _objects(plan) == []
    assert _objects(plan._replace(notes=(object(),))) == ["plan.notes[0]: object"]  # what it would find


def test_the_dry_run_says_which_network_variables_are_the_jobs_own(tmp_path: Path) -> None:
    """A network variable of the user's replaces the image's default, and the plan's notes (logged at the start,
    printed by `train --dry-run`) say so; the ranks get the user's value from the inherited environment."""
    plan = _plan(tmp_path, "algo-1", NCCL_SOCKET_IFNAME="ens5")
    assert "NCCL_SOCKET_IFNAME: the job's own value is kept (the image's default: eth0)" in plan.notes
    assert "NCCL_SOCKET_IFNAME" not in plan.env_set and plan.child_env({"NCCL_SOCKET_IFNAME": "ens5"})["NCCL_SOCKET_IFNAME"] == "ens5"
    assert not any("NCCL_SOCKET_IFNAME" in note for note in _plan(tmp_path / "again", "algo-1").notes)


def test_the_dry_run_says_per_pipe_channel_how_its_records_are_dealt(tmp_path: Path) -> None:
    """The README's Pipe-mode rule, per channel: a FullyReplicated channel of an MPI job on several hosts is dealt
    across the job's hosts (with one rank a host too: through a demultiplexer, not read whole), agreed through the
    master's control server; SMTRAIN_PIPE_DEALING=host deals it on each host alone; a ShardedByS3Key one is each
    host's own share, dealt across its ranks; the ranks' SM_PIPE_DEALT_<C> says which."""
    plan = _plan(tmp_path, "algo-2")
    (note,) = [n for n in plan.notes if n.startswith("Pipe channel train:")]
    assert "deals it alike, in whole records, to the job's ranks that open it, over its 2 hosts" in note, note
    (spec,) = plan.demux
    assert spec.args[-2:] == ("--job", "algo-1:7100:algo-2:2:2") and plan.env_set["SM_PIPE_DEALT_TRAIN"] == "job"

    def plan_of(name: str, channel: dict, hyperparameters: dict = MPI, **env: str):
        tree = make_tree(tmp_path / name, hosts=HOSTS, current_host="algo-1", hyperparameters=hyperparameters,
                         channels={"train": {**PIPE["train"], **channel}})
        return plan_launch(load_config(tree.env(SM_CONTROL_PORT="7100", **env)), FACTS, "/venv/bin/python",
                           token="t" * 32)

    one = plan_of("one", {}, {**MPI, "sagemaker_mpi_num_of_processes_per_host": "1"})
    assert [s.args[-2:] for s in one.demux] == [("--job", "algo-1:7100:algo-1:2:0")]
    assert one.env_set["SM_PIPE_MODE_TRAIN"] == "demux"
    for name, made in (("sharded", plan_of("sharded", {"S3DistributionType": "ShardedByS3Key"})),
                       ("host", plan_of("host", {}, SMTRAIN_PIPE_DEALING="host"))):
        (spec,) = made.demux
        assert "--job" not in spec.args and made.env_set["SM_PIPE_DEALT_TRAIN"] == "host", name
        (note,) = [n for n in made.notes if n.startswith("Pipe channel train:")]
        assert note.startswith("Pipe channel train: dealt in whole records to those of this host's 2 ranks"), note
        assert ("its own share of the objects (ShardedByS3Key)" in note) == (name == "sharded"), note
    with pytest.raises(ConfigError, match="SMTRAIN_PIPE_DEALING.*job or host"):
        plan_of("bad", {}, SMTRAIN_PIPE_DEALING="hosts")

