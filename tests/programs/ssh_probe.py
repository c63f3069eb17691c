"""An MPI job's ranks look at the job's ssh trust (no framework): rank 0, on the master, logs into the
worker with the job's key, with root's own key (another key of the same image: the cluster's shared
~/.ssh) and with the key it kept from the job before; the worker's rank writes the one key its sshd
trusts and its host key. Everything goes to output/data/ssh-<job>.json; the previous job's private key to
~/.ssh/previous_job_key (the harness's shared folder, never /opt/ml)."""
import argparse
import json
import os
import shutil
import subprocess

parser = argparse.ArgumentParser()
parser.add_argument("--job", required=True)
args = parser.parse_args()
rank, folder = int(os.environ["SM_RANK"]), "/run/smtrain/ssh"
out = os.path.join(os.environ["SM_OUTPUT_DATA_DIR"], f"ssh-{args.job}-rank{rank}.json")


def login(key: str) -> int:
    if not os.path.exists(key):
        return -1
    return subprocess.run(["ssh", "-i", key, "-o", "IdentitiesOnly=yes", "-F", "/dev/null", "-o", "BatchMode=yes",
                           "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR",
                           "algo-2", "true"], capture_output=True, timeout=60).returncode


found = {"environment": {k: v for k, v in os.environ.items() if any(s in v for s in (folder, "ssh-ed25519", "PRIVATE KEY"))}}
if rank == 0:
    previous = "/root/.ssh/previous_job_key"
    found["logins"] = {"job": login(f"{folder}/job_ed25519"), "root": login("/root/.ssh/id_ed25519"),
                       "previous job": login(previous)}
    found["job_key"] = open(f"{folder}/job_ed25519.pub").read().split()[1]
    shutil.copy(f"{folder}/job_ed25519", previous)
else:
    found["trusted"] = open(f"{folder}/authorized_keys").read()
    found["host_key"] = open(f"{folder}/host_ed25519_key.pub").read().split()[1]
with open(out, "w") as f:
    json.dump(found, f)
