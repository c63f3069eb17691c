"""The program's name is admitted exactly as sagemaker-training 5.1.4's `process.validate_entry_point`
admits it: that function, run on the same names, is the oracle (in a subprocess: sagemaker-training
makes folders when imported)."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from smtrain.config.entry_point import check_entry_point
from smtrain.errors import ConfigError

NAMES = ["train.py", "train.sh", "bin/train.sh", "a/b/c.py", "_x.py", ".hidden.py", "x+y-z_1.py", "run", "T9",
         "", "/etc/passwd", "/abs/train.py", "-m", "--help.py", "../../x.py", "a/../b.py", "./train.py", "a/./b.py",
         "a/.", "..", ".", "dir/", "a//b.py", "train .py", "tr;ain.py", "$(id).py", "train.py\n", "tráin.py",
         "a\\b.py", "x*.py", "+x.py", "a/-b.py", "a/+b.py", "a/.b.py", "a/..b.py", "...", "a/...", "~/x.py"]
ORACLE = """
import json, sys
from sagemaker_training import errors, process
names, verdicts = json.loads(sys.stdin.read()), []
for name in names:
    try:
        process.validate_entry_point(name)
        verdicts.append(True)
    except errors.ClientError:
        verdicts.append(False)
print(json.dumps(verdicts))
"""


def _oracle(tmp_path_factory: pytest.TempPathFactory) -> list[bool]:
    base = tmp_path_factory.mktemp("sagemaker-training")
    done = subprocess.run([sys.executable, "-c", ORACLE], input=json.dumps(NAMES), capture_output=True, text=True,
                          timeout=60, env={"SAGEMAKER_BASE_DIR": str(base), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)


def test_every_name_is_admitted_or_refused_as_sagemaker_training_does(tmp_path_factory: pytest.TempPathFactory) -> None:
    verdicts = dict(zip(NAMES, _oracle(tmp_path_factory)))
    assert not all(verdicts.values()) and any(verdicts.values())
    for name, admitted in verdicts.items():
        if admitted:
            assert check_entry_point(name, "hyperparameter sagemaker_program") == name
        else:
            with pytest.raises(ConfigError) as refused:
                check_entry_point(name, "hyperparameter sagemaker_program")
            said = str(refused.value)
            assert said.startswith("hyperparameter sagemaker_program: ") and "the program" in said and "expected a path inside" in said
