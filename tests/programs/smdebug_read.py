"""Reads a profiler folder with smdebug's own reader, in smdebug's environment (/opt/smtrain/smdebug,
requirements/smdebug.txt), and prints what it loaded as JSON, for the tests to compare.

    smdebug_read.py OUT.json system FOLDER START_US END_US   -> [[name, dimension, value, node_id], ...]
    smdebug_read.py OUT.json framework FOLDER START_US END_US
        -> {"events": [[name, node_id, step_num, start_us, end_us], ...],   (LocalAlgorithmMetricsReader)
            "pandas": [[framework_metric, step, nodeID], ...]}               (PandasFrame's framework metrics)

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
elif kind == "framework":
    from smdebug.profiler.algorithm_metrics_reader import LocalAlgorithmMetricsReader
    from smdebug.profiler.analysis.utils.profiler_data_to_pandas import PandasFrame

    events = LocalAlgorithmMetricsReader(folder).get_events(start, end)
    frame = PandasFrame(folder).get_all_framework_metrics()
    with open(out, "w") as f:
        json.dump({"events": [[e.event_name, e.node_id, (e.event_args or {}).get("step_num"), e.start_time, e.end_time]
                              for e in events],
                   "pandas": [[str(r.framework_metric), int(r.step), str(r.nodeID)] for r in frame.itertuples()]}, f)
else:
    raise SystemExit(f"unknown kind {kind!r}")
