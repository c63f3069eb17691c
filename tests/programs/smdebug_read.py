"""Reads a profiler folder with smdebug's own reader, in smdebug's environment (/opt/smtrain/smdebug,
requirements/smdebug.txt), and prints what it loaded as JSON, for the tests to compare.

    smdebug_read.py system FOLDER START_US END_US   -> [[name, dimension, value, node_id], ...]
"""
import json
import sys

kind, folder, start, end = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
if kind == "system":
    from smdebug.profiler.system_metrics_reader import LocalSystemMetricsReader

    events = LocalSystemMetricsReader(folder).get_events(start, end)
    json.dump([[e.name, e.dimension, e.value, e.node_id] for e in events], sys.stdout)
else:
    raise SystemExit(f"unknown kind {kind!r}")
