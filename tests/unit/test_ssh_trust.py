"""The job's ssh keys: what a worker accepts as the job's public key (checked against ssh-keygen's own
output and reading, the reference), the files train makes, which plans use them, and which hosts ssh's
settings for the job apply to (read back by ssh itself: `ssh -G`)."""
from __future__ import annotations

import base64
import stat
import subprocess
from pathlib import Path

import pytest

from smtrain.config.load import load_config
from smtrain.plan.launch import plan_launch
from smtrain.starters.mpirun.keys import make_host_key, make_job_key, trust_key
from smtrain.plan.mpirun_command import MpirunSpec
from smtrain.starters.registry import master_policy
from smtrain.wire.ssh_trust import (AUTHORIZED_KEYS, CLIENT_CONFIG, HOST_KEY, JOB_KEY, SSH_DIR, client_config,
                                    parse_public_key)
from tests.support import make_tree
from tests.harness.plans import FACTS, MPI


def _keygen(folder: Path, kind: str = "ed25519") -> str:
    subprocess.run(["ssh-keygen", "-q", "-t", kind, "-N", "", "-C", "someone@somewhere", "-f", str(folder / kind)],
                   check=True, capture_output=True, timeout=30)
    return (folder / f"{kind}.pub").read_text()


def test_an_ed25519_public_key_from_ssh_keygen_is_taken_without_its_comment(tmp_path: Path) -> None:
    line = _keygen(tmp_path)
    key = parse_public_key(line)
    assert line.startswith(key + " someone@somewhere") and key.count(" ") == 1
    (tmp_path / "back.pub").write_text(key + "\n")  # and ssh-keygen reads what the worker would write
    shown = subprocess.run(["ssh-keygen", "-l", "-f", str(tmp_path / "back.pub")], capture_output=True, text=True,
                           timeout=30)
    assert shown.returncode == 0 and "(ED25519)" in shown.stdout


def _blob(name: bytes, key: bytes) -> str:
    return base64.b64encode(len(name).to_bytes(4, "big") + name + len(key).to_bytes(4, "big") + key).decode()


@pytest.mark.parametrize("given,why", [
    (None, "no key was given"),
    ("", "no key was given"),
    ("ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQ", "expected one 'ssh-ed25519 <base64>' line"),
    ('command="sh" ' + "ssh-ed25519 " + _blob(b"ssh-ed25519", bytes(32)), "expected one"),
    ("ssh-ed25519 " + _blob(b"ssh-ed25519", bytes(32)) + "\nssh-ed25519 " + _blob(b"ssh-ed25519", bytes(32)),
     "expected one"),
    ("ssh-ed25519 " + _blob(b"ssh-ed25519", bytes(31)), "not an ed25519 public key"),
    ("ssh-ed25519 " + _blob(b"ssh-ed448", bytes(32)), "not an ed25519 public key"),
    ("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI", "does not decode"),
], ids=["none", "empty", "rsa", "options", "two-lines", "short-key", "other-type", "bad-base64"])
def test_anything_but_one_plain_ed25519_key_is_refused_saying_why(given: object, why: str) -> None:
    with pytest.raises(ValueError, match=why.replace("(", r"\(").replace("<", "<")):
        parse_public_key(given)


def test_an_ecdsa_key_from_ssh_keygen_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="expected one 'ssh-ed25519"):
        parse_public_key(_keygen(tmp_path, "ecdsa"))


def test_the_files_are_root_only_new_for_each_job_and_the_worker_trusts_one_key(tmp_path: Path) -> None:
    folder = tmp_path / "run" / "ssh"
    first = make_job_key(str(folder), ("algo-2",))
    assert parse_public_key(first) == first and "smtrain" not in first
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700 and stat.S_IMODE((folder / JOB_KEY).stat().st_mode) == 0o600
    assert (folder / JOB_KEY).read_text().startswith("-----BEGIN OPENSSH PRIVATE KEY-----")
    assert make_job_key(str(folder), ("algo-2",)) != first  # the next job's key is another
    (folder / AUTHORIZED_KEYS).write_text("ssh-ed25519 AAAA an earlier job's\n")
    make_host_key(str(folder))
    assert (folder / HOST_KEY).is_file() and not (folder / AUTHORIZED_KEYS).exists()
    trust_key(str(folder), first)
    assert (folder / AUTHORIZED_KEYS).read_text() == first + "\n"
    assert stat.S_IMODE((folder / AUTHORIZED_KEYS).stat().st_mode) == 0o600
    (folder / AUTHORIZED_KEYS).write_text("ssh-ed25519 AAAA a key put there after the host key\n")
    trust_key(str(folder), first)  # replaces, never appends
    assert (folder / AUTHORIZED_KEYS).read_text() == first + "\n"
    assert stat.S_IMODE((folder / CLIENT_CONFIG).stat().st_mode) == 0o600
    assert sorted(p.name for p in folder.iterdir()) == sorted([AUTHORIZED_KEYS, CLIENT_CONFIG, HOST_KEY, HOST_KEY + ".pub",
                                                               JOB_KEY, JOB_KEY + ".pub"])


def test_a_one_host_mpi_job_makes_no_key(tmp_path: Path) -> None:
    tree = make_tree(tmp_path, hosts=("algo-1",), current_host="algo-1", hyperparameters=MPI)
    plan = plan_launch(load_config(tree.env()), FACTS, "/venv/bin/python", token="t" * 32)
    assert plan.coordination is not None
    starter = plan.coordination.starter
    assert isinstance(starter, MpirunSpec) and starter.ssh_dir == "" and master_policy(starter).admission(()) == ""


def test_the_images_sshd_names_no_key_and_its_ssh_client_only_includes_the_jobs_settings() -> None:
    """docker/ssh_config and docker/sshd_config against smtrain.wire.ssh_trust (as the harness's hosts get them too)."""
    from tests.harness.cluster import ssh_client_config, sshd_config

    docker = Path(__file__).resolve().parent.parent.parent / "docker"
    for client in ((docker / "ssh_config").read_text(), ssh_client_config()):
        settings = [line.split() for line in client.splitlines() if line.strip() and not line.lstrip().startswith("#")]
        assert settings == [["Include", f"{SSH_DIR}/{CLIENT_CONFIG}"]]  # nothing under `Host *`
    for server in ((docker / "sshd_config").read_text(), sshd_config()):
        names = {line.split()[0] for line in server.splitlines() if line.strip() and not line.startswith("#")}
        assert not names & {"HostKey", "AuthorizedKeysFile", "AuthorizedKeysCommand"}  # train gives both per job
        effective = _sshd_settings(server)  # as sshd itself reads the file
        assert (effective["passwordauthentication"], effective["kbdinteractiveauthentication"],
                effective["pubkeyauthentication"], effective["permitrootlogin"]) == ("no", "no", "yes",
                                                                                      "without-password"), effective


def _sshd_settings(config_text: str) -> dict[str, str]:
    """What sshd would run with, given `config_text` (`sshd -T`, with a host key made for the look)."""
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        config, key = Path(folder, "sshd_config"), Path(folder, "host")
        config.write_text(config_text)
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True, timeout=30)
        Path("/run/sshd").mkdir(mode=0o755, parents=True, exist_ok=True)  # as train makes it before sshd starts
        shown = subprocess.run(["/usr/sbin/sshd", "-T", "-f", str(config), "-h", str(key)], capture_output=True,
                               text=True, timeout=30)
    assert shown.returncode == 0, shown.stderr
    return dict(line.partition(" ")[::2] for line in shown.stdout.splitlines())


def _ssh_settings(config: Path, host: str) -> dict[str, list[str]]:
    """What ssh itself would use for `host` with `config` as its configuration (`ssh -G`)."""
    shown = subprocess.run(["ssh", "-F", str(config), "-G", host], capture_output=True, text=True, timeout=30, check=True)
    settings: dict[str, list[str]] = {}
    for line in shown.stdout.splitlines():
        name, _, value = line.partition(" ")
        settings.setdefault(name, []).append(value)
    return settings


def test_the_jobs_ssh_settings_reach_its_hosts_and_no_other(tmp_path: Path) -> None:
    """docker/ssh_config with its include moved under tmp_path, read by ssh: before the master writes the
    job's settings, and for any host that is not the job's after, ssh keeps its defaults."""
    folder = tmp_path / "ssh"
    config = tmp_path / "ssh_config"
    docker = (Path(__file__).resolve().parent.parent.parent / "docker" / "ssh_config").read_text()
    config.write_text(docker.replace(SSH_DIR, str(folder)))
    defaults = _ssh_settings(config, "algo-2")  # nothing written yet: a missing include is no error
    assert defaults["stricthostkeychecking"] == ["ask"] and f"{SSH_DIR}/{JOB_KEY}" not in defaults["identityfile"]
    make_job_key(str(folder), ("algo-2", "algo-3"))
    for host in ("algo-2", "algo-3"):
        job = _ssh_settings(config, host)
        assert job["identityfile"] == [f"{SSH_DIR}/{JOB_KEY}"] and job["identitiesonly"] == ["yes"]
        assert job["stricthostkeychecking"] == ["false"] and job["userknownhostsfile"] == ["/dev/null"]
        assert job["kexalgorithms"] == ["curve25519-sha256,curve25519-sha256@libssh.org"]
    (tmp_path / "empty").write_text("")
    for host in ("algo-1", "algo-22", "github.com", "10.0.0.2"):  # the master itself, another job's, outside
        assert _ssh_settings(config, host) == _ssh_settings(tmp_path / "empty", host), host


@pytest.mark.parametrize("hosts,why", [
    ((), "no host was given"),
    (("algo-1", "*"), "host '\\*' is not a plain host name"),
    (("!algo-1",), "host '!algo-1' is not a plain host name"),
    (("algo-1 algo-2",), "is not a plain host name"),
    (("algo-1,algo-2",), "is not a plain host name"),
    (("algo-1\nHost *",), "is not a plain host name"),
    (("",), "is not a plain host name"),
], ids=["none", "star", "negation", "space", "comma", "newline", "empty"])
def test_a_host_name_ssh_would_read_as_a_pattern_is_refused(hosts: tuple, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        client_config(hosts)


def test_a_master_that_cannot_write_the_jobs_settings_fails_with_startup_failed(tmp_path: Path) -> None:
    from smtrain.errors import StartupFailed

    with pytest.raises(StartupFailed, match="cannot write ssh's settings for the job's hosts: host 'a b'"):
        make_job_key(str(tmp_path / "ssh"), ("a b",))
    assert not (tmp_path / "ssh" / JOB_KEY).exists()
