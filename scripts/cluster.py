"""Simulated SageMaker hosts on this machine (root): the command line of tests/harness/cluster.py.

    /opt/smtrain/venv/bin/python scripts/cluster.py up NAME --hosts 2 [--mpi 2]
    /opt/smtrain/venv/bin/python scripts/cluster.py start|wait|down NAME
    /opt/smtrain/venv/bin/python scripts/cluster.py exec NAME algo-2 -- ps aux
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.harness.cluster import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
