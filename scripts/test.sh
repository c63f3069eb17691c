#!/usr/bin/env bash
# The project's test command (README; .ci/run calls exactly this): set up, then run every test.
#   scripts/test.sh [pytest arguments]
# Fails when a test fails, and also when no test ran (pytest's exit 5).
set -uo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
venv=${SMTRAIN_VENV:-/opt/smtrain/venv}
"$here/scripts/setup.sh" || exit $?
cd "$here" || exit
"$venv/bin/python" -m pytest -p no:cacheprovider -ra --durations=30 "$@"
rc=$?
if [ $rc -eq 5 ]; then
  echo "test.sh: no tests ran - treating that as a failure" >&2
  exit 1
fi
exit $rc
