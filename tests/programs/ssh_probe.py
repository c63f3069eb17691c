"""An MPI job's ranks look at the job's ssh trust (no framework). Rank 0, on the master, logs into the
worker with the job's key, with root's own key (another key of the same image: the cluster's shared
~/.ssh) and with the key it kept from the job before (--keep) - each made there first where there is none,
so that every login is tried; and it reaches a host outside the job
the way a script's own ssh would (git over ssh, a tunnel): an sshd of its own on 127.0.0.1:2022 that
trusts the job's key, reached with ssh's settings as they are - its unknown host key must be refused,
and once known, no key of the job offered. The worker's rank writes the one key its sshd trusts and its
host key. Everything goes to output/data/ssh-<job>-rank<r>.json; the job's private key is kept for the
next job at --keep (never under /opt/ml)."""
import argparse
import json
import os
import shutil
import socket
import subprocess
import tempfile
import time

parser = argparse.ArgumentParser()
parser.add_argument("--job", required=True)
parser.add_argument("--keep", default="/root/.ssh/previous_job_key")
args = parser.parse_args()
rank, folder = int(os.environ["SM_RANK"]), "/run/smtrain/ssh"
out = os.path.join(os.environ["SM_OUTPUT_DATA_DIR"], f"ssh-{args.job}-rank{rank}.json")
BOUNDED = ["-o", "BatchMode=yes", "-o", "ConnectTimeout=10"]


def login(key: str) -> list:
    """[ssh's status, its last line] logging into algo-2 with `key` alone (made first where there is none)."""
    if not os.path.exists(key):
        os.makedirs(os.path.dirname(key), mode=0o700, exist_ok=True)
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", key], check=True, timeout=30)
    done = subprocess.run(["ssh", "-i", key, "-o", "IdentitiesOnly=yes", "-F", "/dev/null", "-o", "BatchMode=yes",
                           "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR",
                           "algo-2", "true"], capture_output=True, text=True, timeout=60)
    return [done.returncode, done.stderr.strip().splitlines()[-1:]]


def outside_host(job_public_key: str) -> dict:
    """ssh, with the settings a script gets, to an sshd outside the job that would accept the job's key."""
    here = tempfile.mkdtemp()
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", f"{here}/host"], check=True, timeout=30)
    with open(f"{here}/authorized", "w") as f:
        f.write(job_public_key)
    with open(f"{here}/known", "w") as f:
        f.write("[127.0.0.1]:2022 " + open(f"{here}/host.pub").read())
    os.makedirs("/run/sshd", exist_ok=True)
    sshd = subprocess.Popen(["/usr/sbin/sshd", "-D", "-e", "-f", "/dev/null", "-p", "2022", "-h", f"{here}/host",
                             "-o", "ListenAddress=127.0.0.1", "-o", f"AuthorizedKeysFile={here}/authorized",
                             "-o", "StrictModes=no", "-o", "PidFile=none", "-o", "UsePAM=no",
                             "-o", "AuthenticationMethods=publickey"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", 2022), timeout=1).close()
                break
            except OSError:
                time.sleep(0.05)

        def ssh(*options: str) -> list:
            done = subprocess.run(["ssh", "-p", "2022", *BOUNDED, *options, "127.0.0.1", "true"], capture_output=True,
                                  text=True, timeout=60)
            return [done.returncode, done.stderr.strip().splitlines()[-1:]]

        return {"unknown host": ssh(), "known host": ssh("-o", f"UserKnownHostsFile={here}/known"),
                "job key given": ssh("-o", f"UserKnownHostsFile={here}/known", "-i", f"{folder}/job_ed25519")}
    finally:
        sshd.kill()
        sshd.wait()
        shutil.rmtree(here)


found = {"environment": {k: v for k, v in os.environ.items() if any(s in v for s in (folder, "ssh-ed25519", "PRIVATE KEY"))}}
if rank == 0:
    kept = os.path.exists(args.keep)
    found["logins"] = {"job": login(f"{folder}/job_ed25519"), "root": login("/root/.ssh/id_ed25519"),
                       "previous job": login(args.keep)}
    found["kept_key_was_the_previous_jobs"] = kept
    public = open(f"{folder}/job_ed25519.pub").read()
    found["job_key"] = public.split()[1]
    found["outside"] = outside_host(public)
    os.makedirs(os.path.dirname(args.keep), mode=0o700, exist_ok=True)
    shutil.copy(f"{folder}/job_ed25519", args.keep)
else:
    found["trusted"] = open(f"{folder}/authorized_keys").read()
    found["host_key"] = open(f"{folder}/host_ed25519_key.pub").read().split()[1]
with open(out, "w") as f:
    json.dump(found, f)
