"""The mpirun command as a pure function of the plan's inputs: representative plans."""
from __future__ import annotations

import pytest

from smtrain.plan.mpirun_command import MpiLayout, NetworkFacts, choose_interface, is_exported, layout, mpirun_command

NET = NetworkFacts(interfaces=("eth0", "lo"), default_route_interface="eth0", efa_present=False)
EFA_NET = NetworkFacts(interfaces=("eth0", "lo"), default_route_interface="eth0", efa_present=True)
RANK = ("/venv/bin/python", "-m", "smtrain.rank", "--", "/venv/bin/python", "/opt/ml/code/train.py", "--lr", "0.1")


def _command(**overrides):
    args = dict(job=layout(("algo-1", "algo-2"), 4, None, 0), current_host="algo-1", wanted_interface="eth0",
                instance_type="ml.c5.18xlarge", network=NET, env={"PATH": "/bin", "SM_HPS": "{}"},
                custom_options=(), rank_argv=RANK)
    args.update(overrides)
    return mpirun_command(**args)


def _option(argv: tuple[str, ...], name: str) -> list[str]:
    return [argv[i + 1] for i, a in enumerate(argv) if a == name]


def test_layout_defaults_to_one_process_per_gpu_else_one() -> None:
    assert layout(("a", "b"), None, None, num_gpus=8) == MpiLayout(("a", "b"), 8, 16)
    assert layout(("a", "b", "c"), None, None, num_gpus=0) == MpiLayout(("a", "b", "c"), 1, 3)
    assert layout(("a", "b"), 2, 3, num_gpus=8).num_processes == 3


def test_hosts_slots_np_and_the_master_as_localhost() -> None:
    argv = _command(current_host="algo-1").argv
    assert _option(argv, "--host") == ["localhost:4,algo-2:4"]
    assert _option(argv, "-np") == ["8"]
    assert argv[argv.index("--bind-to") + 1] == "none" and argv[argv.index("--map-by") + 1] == "slot"
    # SDK local mode: the current host is known by its alias only; it is still the local one.
    argv = _command(job=layout(("algo-1-ab3x9", "algo-2-ab3x9"), 1, None, 0), current_host="algo-1-ab3x9").argv
    assert _option(argv, "--host") == ["localhost:1,algo-2-ab3x9:1"]


def test_abort_on_failure_without_kill_delay_and_no_output_tags() -> None:
    argv = _command().argv
    mca = {argv[i + 1]: argv[i + 2] for i, a in enumerate(argv) if a == "--mca"}
    assert mca["orte_abort_on_non_zero_status"] == "1"
    assert mca["odls_base_sigkill_timeout"] == "0"
    assert mca["plm_rsh_no_tree_spawn"] == "1"
    assert "--tag-output" not in argv and "--display-map" not in argv


def test_mpiruns_ssh_shares_a_held_connection_where_one_is_given() -> None:
    def rsh_args(argv: tuple[str, ...]) -> list[str]:
        return [argv[i + 2] for i, a in enumerate(argv) if a == "--mca" and argv[i + 1] == "plm_rsh_args"]

    assert rsh_args(_command(ssh_control_path="/run/x/mux-%n").argv) == ["-oControlPath=/run/x/mux-%n"]
    assert rsh_args(_command().argv) == []
    assert rsh_args(_command(job=layout(("algo-1",), 2, None, 0), ssh_control_path="/run/x/mux-%n").argv) == []  # no ssh
    mine = ("--mca", "plm_rsh_args", "-p 2200")  # the user's own ssh arguments replace ours
    assert rsh_args(_command(ssh_control_path="/run/x/mux-%n", custom_options=mine).argv) == ["-p 2200"]


def test_interface_for_btl_oob_and_nccl() -> None:
    command = _command(wanted_interface="eth0")
    argv = command.argv
    assert argv[argv.index("btl_tcp_if_include") + 1] == "eth0" and argv[argv.index("oob_tcp_if_include") + 1] == "eth0"
    assert command.env["NCCL_SOCKET_IFNAME"] == "eth0" and "NCCL_SOCKET_IFNAME" in _option(argv, "-x")


def test_missing_interface_falls_back_to_the_default_route() -> None:
    """SDK local mode says ethwe; the container has eth0."""
    assert choose_interface("ethwe", NET) == "eth0"
    command = _command(wanted_interface="ethwe")
    assert command.argv[command.argv.index("btl_tcp_if_include") + 1] == "eth0"
    assert choose_interface(None, NetworkFacts(("lo",), None, False)) is None
    assert "btl_tcp_if_include" not in _command(network=NetworkFacts(("lo",), None, False)).argv


@pytest.mark.parametrize("instance_type,rdma", [("ml.p4d.24xlarge", True), ("ml.p5.48xlarge", True),
                                                ("ml.p3dn.24xlarge", False), ("ml.g5.48xlarge", False),
                                                ("ml.g6e.24xlarge", False)])
def test_the_efa_device_decides_whatever_the_instance_type(instance_type: str, rdma: bool) -> None:
    command = _command(instance_type=instance_type, network=EFA_NET._replace(nccl_net_plugin=True))
    assert command.env["FI_PROVIDER"] == "efa"
    assert ("FI_EFA_USE_DEVICE_RDMA" in command.env) == rdma
    assert ("NCCL_PROTO" in command.env) == (not rdma)  # NCCL over EFA without RDMA: in-order protocol
    assert "NCCL_PROTO" not in _command(instance_type=instance_type, network=EFA_NET).env  # no plugin: sockets
    assert "FI_PROVIDER" in _option(command.argv, "-x")
    assert command.argv[command.argv.index("btl") + 1] == "^openib"  # libfabric's btl may carry MPI over EFA


def test_network_variables_the_user_set_win_over_the_images_defaults_and_are_named() -> None:
    """The job's environment (SDK `environment=`, the image's ENV) or `-x NAME=value` in the user's options: the
    user's value reaches the ranks; `kept` names each with the default it replaced (the dry-run's notes)."""
    mine = {"PATH": "/bin", "NCCL_SOCKET_IFNAME": "ens5", "FI_PROVIDER": "tcp", "FI_EFA_USE_DEVICE_RDMA": "0",
            "GLOO_SOCKET_IFNAME": "ens5"}
    command = _command(instance_type="ml.p4d.24xlarge", network=EFA_NET._replace(nccl_net_plugin=True), env=mine)
    assert {k: command.env[k] for k in mine} == mine
    assert command.env["HOROVOD_GLOO_IFACE"] == "eth0"  # not set by the user: the image's
    assert command.kept == {"NCCL_SOCKET_IFNAME": "eth0", "FI_PROVIDER": "efa", "FI_EFA_USE_DEVICE_RDMA": "1",
                            "GLOO_SOCKET_IFNAME": "eth0"}
    proto = _command(instance_type="ml.g5.48xlarge", network=EFA_NET._replace(nccl_net_plugin=True),
                     custom_options=("-x", "NCCL_PROTO=LL128"))
    assert proto.kept == {"NCCL_PROTO": "simple"} and "NCCL_PROTO" not in _option(proto.argv, "-x")
    assert _command().kept == {}  # nothing set by the user: the image's defaults, nothing to say


def test_efa_instance_without_the_device_gets_no_efa_settings() -> None:
    command = _command(instance_type="ml.p4d.24xlarge", network=NET)
    assert "FI_PROVIDER" not in command.env and "FI_PROVIDER" not in _option(command.argv, "-x")
    assert command.argv[command.argv.index("btl") + 1] == "^openib,ofi"  # its finalize cost every job ~1 s




def test_environment_travels_by_name_only() -> None:
    env = {"PATH": "/bin", "AWS_SECRET_ACCESS_KEY": "s3cr3t", "HOSTNAME": "x", "SM_CURRENT_HOST": "algo-1",
           "OMPI_MCA_foo": "1", "SM_HP_LEARNING-RATE": "0.1"}
    command = _command(env=env)
    exported = _option(command.argv, "-x")
    assert "AWS_SECRET_ACCESS_KEY" in exported and "s3cr3t" not in " ".join(command.argv)
    assert "PATH" in exported and "SM_HP_LEARNING-RATE" in exported
    assert not {"HOSTNAME", "SM_CURRENT_HOST", "OMPI_MCA_foo"} & set(exported)
    assert command.env["AWS_SECRET_ACCESS_KEY"] == "s3cr3t"  # mpirun itself has it, to pass it on


def test_custom_options_come_before_the_program() -> None:
    argv = _command(custom_options=("--mca", "btl_tcp_if_exclude", "docker0", "-x", "NCCL_DEBUG=WARN")).argv
    assert argv[-len(RANK):] == RANK
    assert argv[-len(RANK) - 5:-len(RANK)] == ("--mca", "btl_tcp_if_exclude", "docker0", "-x", "NCCL_DEBUG=WARN")


def test_is_exported() -> None:
    assert is_exported("LD_LIBRARY_PATH") and not is_exported("BASH_FUNC_x%%") and not is_exported("PWD")


@pytest.mark.parametrize("options", [("--NCCL_DEBUG=INFO", "--mca", "btl_tcp_if_exclude", "docker0"),
                                     ("--NCCL_DEBUG", "INFO", "--mca", "btl_tcp_if_exclude", "docker0")])
def test_nccl_debug_option_becomes_the_ranks_nccl_debug(options) -> None:
    """As AWS's samples write it; mpirun itself would fail with 'unknown option'."""
    command = _command(custom_options=options)
    assert command.env["NCCL_DEBUG"] == "INFO" and "NCCL_DEBUG" in _option(command.argv, "-x")
    assert not any("NCCL_DEBUG=" in a or a == "--NCCL_DEBUG" for a in command.argv)
    assert command.argv[-len(RANK) - 3:-len(RANK)] == ("--mca", "btl_tcp_if_exclude", "docker0")


def test_a_user_option_that_contradicts_a_default_replaces_it() -> None:
    argv = _command(env={"PATH": "/bin", "NCCL_ALGO": "Tree"},
                    custom_options=("--map-by", "ppr:2:socket", "-bind-to", "core", "--mca", "pml", "cm",
                                    "--mca", "btl_tcp_if_include", "eth1", "-x", "NCCL_ALGO=Ring")).argv
    assert _option(argv, "--map-by") == ["ppr:2:socket"] and _option(argv, "--bind-to") == []
    assert _option(argv, "-bind-to") == ["core"]
    mca = [argv[i + 1:i + 3] for i, a in enumerate(argv) if a == "--mca"]
    assert [k for k, _ in mca].count("pml") == 1 and ("pml", "cm") in [tuple(m) for m in mca]
    assert ("btl_tcp_if_include", "eth1") in [tuple(m) for m in mca]
    assert ("btl_tcp_if_include", "eth0") not in [tuple(m) for m in mca]
    assert ("oob_tcp_if_include", "eth0") in [tuple(m) for m in mca]  # not contradicted: kept
    assert _option(argv, "-x").count("NCCL_ALGO=Ring") == 1 and "NCCL_ALGO" not in _option(argv, "-x")


def test_ranks_on_a_cpu_host_are_bound_to_cpus_of_their_own() -> None:
    """P ranks on C CPUs without GPUs: each bound to C/P hardware threads, as the rank launcher splits threads."""
    from smtrain.plan.mpirun_command import cpus_per_rank

    ml = "ml.c5.18xlarge"
    assert cpus_per_rank(2, 2, 0, ml) == 1 and cpus_per_rank(4, 72, 0, ml) == 18 and cpus_per_rank(3, 8, 0, ml) == 2
    assert cpus_per_rank(1, 8, 0, ml) == 0  # one rank: nothing to keep apart
    assert cpus_per_rank(8, 96, 8, "ml.p4d.24xlarge") == 0  # GPUs: ranks feed devices, Horovod's and NCCL's threads roam
    assert cpus_per_rank(4, 2, 0, ml) == 0  # oversubscribed: binding would stack ranks on the same CPUs
    assert cpus_per_rank(2, 8, 0, "local") == 0  # SDK local mode: other hosts' containers may share the CPUs
    argv = _command(cpus_per_rank=18).argv
    assert "--use-hwthread-cpus" in argv
    assert _option(argv, "--bind-to") == ["hwthread"] and _option(argv, "--map-by") == ["slot:PE=18"]
    assert argv.index("--map-by") < argv.index("/venv/bin/python")


def test_a_user_placement_replaces_the_binding_whole() -> None:
    for custom in (("--bind-to", "none"), ("-map-by", "ppr:1:socket"), ("--use-hwthread-cpus",)):
        argv = _command(cpus_per_rank=4, custom_options=custom).argv
        assert "slot:PE=4" not in argv and "hwthread" not in argv and argv.count("--use-hwthread-cpus") <= 1
        assert argv[-len(RANK) - len(custom):-len(RANK)] == custom


@pytest.mark.parametrize("options,shapes", [
    ((), False), (("--mca", "btl_tcp_if_include", "eth0"), False), (("--tag-output",), True), (("-tag-output",), True),
    (("--output-filename", "/tmp/out"), True), (("--output-filename=/tmp/out",), True), (("--timestamp-output",), True),
    (("-x", "NCCL_DEBUG=INFO", "--merge-stderr-to-stdout"), True), (("-x", "tag-output"), False),
])
def test_a_user_who_asks_mpirun_for_its_own_output_handling_gets_mpiruns_forwarding(options, shapes) -> None:
    """Where the user's options shape the ranks' output (tags, files), mpirun's forwarding carries it as plain
    mpirun would; otherwise each rank's output goes to the master's train in whole lines (run.rank_output)."""
    from smtrain.plan.mpirun_command import mpirun_shapes_output
    assert mpirun_shapes_output(options) is shapes


@pytest.mark.parametrize("options,port", [
    ((), 22), (("--mca", "plm_rsh_args", "-p 2200"), 2200), (("-mca", "plm_rsh_args", "-p2201 -v"), 2201),
    (("--mca", "plm_rsh_args", "-o Port=2202"), 2202), (("--mca", "plm_rsh_args", "-oPort=2203"), 2203),
    (("--mca", "plm_rsh_args", "-oStrictHostKeyChecking=no"), 22), (("--mca", "btl", "^openib"), 22),
])
def test_the_master_probes_the_workers_sshd_where_mpiruns_ssh_will_connect(options, port) -> None:
    from smtrain.plan.mpirun_command import ssh_port
    assert ssh_port(options) == port
