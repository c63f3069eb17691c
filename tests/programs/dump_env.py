"""A program that records what it was started with: argv, environment, cwd (JSON to $DUMP_TO)."""
import json
import os
import sys

with open(os.environ["DUMP_TO"], "w") as f:
    json.dump({"argv": sys.argv[1:], "env": dict(os.environ), "cwd": os.getcwd()}, f)
