"""Every setting declared once (smtrain/config/settings.py): a row names one hyperparameter and/or one variable,
and no other module of the package spells a setting's name in its code - it reads the row (`ROW.variable`,
`ROW.hyperparameter`, `settings[ROW]`), messages too. Docstrings and comments may name settings: they are the
documentation. The exceptions, each with why, are `SPELLED_ELSEWHERE`."""
from __future__ import annotations

import ast
import re
from pathlib import Path

from smtrain.config.settings import SETTINGS
from tests.static.test_layers import docstring_ids

PACKAGE = Path(__file__).resolve().parent.parent.parent / "entrypoint" / "smtrain"
DECLARATION = PACKAGE / "config" / "settings.py"
SPELLED_ELSEWHERE = {
    # loads nothing of smtrain at the program's start-up: its copies are held to the rows by
    # tests/process/test_skip_teardown.py::test_the_hook_names_the_settings_variables_and_the_progress_files_slot
    "rank/startup/sitecustomize.py": {"SM_SKIP_TEARDOWN_ON_FAILURE", "SM_CURRENT_HOST"},
    # SDK v3's drivers' environment, name for name as v3 writes it (its own contract, where some names are also
    # sagemaker-training's that stand in for resourceconfig.json)
    "plan/modeltrainer_env.py": {"SM_CURRENT_HOST", "SM_HOSTS", "SM_NETWORK_INTERFACE_NAME", "SM_NUM_CPUS",
                                 "SM_NUM_GPUS"},
}


def _names() -> set[str]:
    return {name for s in SETTINGS for name in (s.hyperparameter, s.variable) if name}


def _code_strings(path: Path) -> list[tuple[int, str]]:
    """The string constants of `path`'s code (f-strings' parts among them), docstrings left out."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = docstring_ids(tree)
    return sorted((node.lineno, node.value) for node in ast.walk(tree)
                  if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings)


def spelled_outside(package: Path = PACKAGE, names: set[str] | None = None) -> list[str]:
    """`file:line: NAME` for every setting's name spelled in code outside its declaration and the exceptions."""
    names = _names() if names is None else names
    pattern = re.compile(r"(?<![A-Za-z0-9_])(" + "|".join(map(re.escape, sorted(names, key=len, reverse=True)))
                         + r")(?![A-Za-z0-9_])")
    found = []
    for path in sorted(package.rglob("*.py")):
        if path == DECLARATION:
            continue
        allowed = SPELLED_ELSEWHERE.get(path.relative_to(package).as_posix(), set())
        for line, text in _code_strings(path):
            found += [f"{path.relative_to(package)}:{line}: {name}" for name in pattern.findall(text) if name not in allowed]
    return found


def test_every_setting_row_names_one_hyperparameter_and_or_one_variable() -> None:
    several = [s.name for s in SETTINGS for given in (s.hyperparameter, s.variable)
               if given and not re.fullmatch(r"[A-Za-z0-9_]+", given)]
    assert several == [], f"rows naming several settings at once (one row each): {several}"
    assert len(_names()) == sum(bool(s.hyperparameter) + bool(s.variable) for s in SETTINGS), "a name on two rows"


def test_no_setting_name_is_spelled_outside_its_declaration() -> None:
    assert spelled_outside() == [], "read the row instead (ROW.variable, ROW.hyperparameter, settings[ROW])"


def test_the_check_finds_a_name_spelled_in_code_and_leaves_docstrings_alone(tmp_path: Path) -> None:
    (tmp_path / "reader.py").write_text('"""Reads SM_STALL_TIMEOUT_SECONDS."""\nimport os\n\n\n'
                                        'def timeout():\n    """SM_STALL_TIMEOUT_SECONDS, else none."""\n'
                                        '    return os.environ.get("SM_STALL_TIMEOUT_SECONDS")  # SM_STALL_TIMEOUT_SECONDS\n'
                                        'WHY = f"set SM_GRACE_PERIOD_SECONDS={1}"\n')
    assert spelled_outside(tmp_path, {"SM_STALL_TIMEOUT_SECONDS", "SM_GRACE_PERIOD_SECONDS"}) == [
        "reader.py:7: SM_STALL_TIMEOUT_SECONDS", "reader.py:8: SM_GRACE_PERIOD_SECONDS"]


def test_the_s3_plugins_sizes_are_the_rows_defaults_and_lower_bounds() -> None:
    """The s3:// file system (C++) reads its own variables; their defaults and minimums are the rows'."""
    source = (PACKAGE.parent.parent / "native" / "s3" / "filesystem.cc").read_text(encoding="utf-8")
    number = r"(\d+(?: << \d+)?)"
    read = {name: (eval(default), eval(minimum))  # noqa: S307 - "8 << 20": digits and shifts, matched above
            for name, default, minimum in re.findall(r'SizeEnv\("(\w+)", ' + number + ", " + number + r"\)", source)}
    rows = {s.variable: (s.default, s.type.bounds[0]) for s in SETTINGS if s.variable in read}
    assert len(read) == 4 and read == rows, (read, rows)
