"""A TF_CONFIG-reading program of a parameter-server job (as TF1-era scripts are): records the
TF_CONFIG it got and whether this host's parameter server (TF_CONFIG's ps on this host) answers,
into SM_OUTPUT_DATA_DIR/tfconfig-<type><index>.json; then runs for --run-for seconds."""
import argparse
import json
import os
import socket
import time

parser = argparse.ArgumentParser()
parser.add_argument("--run-for", type=float, default=1.0)
args, _ = parser.parse_known_args()
config = json.loads(os.environ["TF_CONFIG"])
task = config["task"]
here = os.environ["SM_CURRENT_HOST"]
ps = next(a for a in config["cluster"]["ps"] if a.startswith(here + ":"))
deadline, answered = time.monotonic() + 60, False
while not answered and time.monotonic() < deadline:  # the toolkit starts it beside this program
    try:
        socket.create_connection((ps.split(":")[0], int(ps.split(":")[1])), timeout=1).close()
        answered = True
    except OSError:
        time.sleep(0.2)
with open(os.path.join(os.environ["SM_OUTPUT_DATA_DIR"], f"tfconfig-{task['type']}{task['index']}.json"), "w") as f:
    json.dump({"tf_config": config, "ps_answered": answered, "host": here}, f)
time.sleep(args.run_for)
