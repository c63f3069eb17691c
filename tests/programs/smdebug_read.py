"""Reads a profiler folder with smdebug's own reader, in smdebug's environment (/opt/smtrain/smdebug,
requirements/smdebug.txt), and prints what it loaded as JSON, for the tests to compare.

    smdebug_read.py OUT.json system FOLDER START_US END_US   -> [[name, dimension, value, node_id], ...]

(Into a file: smdebug logs to stdout.)
"""
import json
import sys

out, kind, folder, start, end = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
if kind == "system":
    from smdebug.profiler.system_metrics_reader import LocalSystemMetricsReader

    events = LocalSystemMetricsReader(folder).get_events(start, end)
    with open(out, "w") as f:
        json.dump([[e.name, e.dimension, e.value, e.node_id] for e in events], f)
else:
    raise SystemExit(f"unknown kind {kind!r}")
