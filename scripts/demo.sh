#!/usr/bin/env bash
# The README's demo command: set everything up (apt packages incl. Docker, the Python environment),
# build or reuse the CPU image from a local base, and run a 2-host Horovod job in two containers
# with synthetic data read through Pipe mode. Run as root on Debian 12.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
"$here/scripts/setup.sh"
exec "${SMTRAIN_VENV:-/opt/smtrain/venv}/bin/python" "$here/scripts/demo.py"
