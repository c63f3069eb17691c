"""run/ as a skeleton (docs/architecture.md): the job's steps in run/job.py, the roles on top of it, and below it
modules that never call back up; every helper process declared once (plan/helper_plan.py) and started through
the job's one HelperGroup (a new one added so: tests/process/test_new_helper.py)."""
from __future__ import annotations

import ast

from tests.static.test_layers import MODULES, _imports, _tree

ROLES = {"smtrain.run.host", "smtrain.run.single", "smtrain.run.master", "smtrain.run.worker"}
JOB = "smtrain.run.job"


def _calls(name: str, callee: str) -> list[int]:
    """The lines where module `name` calls something named `callee` (a name or an attribute)."""
    return [node.lineno for node in ast.walk(_tree(name)) if isinstance(node, ast.Call)
            and (getattr(node.func, "id", None) == callee or getattr(node.func, "attr", None) == callee)]


def _below(name: str) -> set[str]:
    """The modules of run/ that `name` imports, and theirs."""
    seen, todo = set(), [name]
    while todo:
        for imported in _imports(todo.pop()):
            if imported.startswith("smtrain.run.") and imported not in seen:
                seen.add(imported)
                todo.append(imported)
    return seen


def test_only_the_roles_work_with_the_job() -> None:
    """What the job hands down is values and functions, never the HostJob: below the roles, nothing calls back up."""
    assert sorted(m for m in MODULES if JOB in _imports(m)) == sorted(ROLES)


def test_nothing_below_the_job_imports_it_or_a_role() -> None:
    below = _below(JOB)
    assert below and not below & (ROLES | {JOB}), sorted(below & (ROLES | {JOB}))


def test_every_helper_process_starts_through_the_one_group() -> None:
    """Processes are started in two places: the program (proc.supervise) and the helpers (proc.helpers, through a
    HelperGroup); the job makes the one group (run.job)."""
    popen = sorted(m for m in MODULES if _calls(m, "Popen"))
    assert popen == ["smtrain.proc.helpers", "smtrain.proc.supervise"], popen
    groups = sorted(m for m in MODULES if _calls(m, "HelperGroup"))
    assert groups == [JOB], groups


def test_each_helper_is_declared_in_the_helper_plan() -> None:
    """A HelperSpec is made in plan/helper_plan.py, or by a rank starter for its own (sshd, the held ssh
    connections); a program is declared there or in wire/programs.py; each helper's module is a module of the
    package, named nowhere else."""
    from smtrain.plan.helper_plan import HELPERS

    makers = sorted(m for m in MODULES if _calls(m, "HelperSpec"))
    assert makers == ["smtrain.plan.helper_plan", "smtrain.starters.mpirun.holds", "smtrain.starters.mpirun.sshd"], \
        makers
    programs = sorted(m for m in MODULES if _calls(m, "Program"))
    assert programs == ["smtrain.plan.helper_plan", "smtrain.wire.programs"], programs
    for declared in HELPERS:
        module = declared.program.module
        assert module in MODULES, module
        naming = sorted(m for m in MODULES if any(isinstance(c, ast.Constant) and c.value == module
                                                  for c in ast.walk(_tree(m))))
        assert naming == ["smtrain.plan.helper_plan"], (module, naming)


def test_run_names_only_the_helpers_it_asks_something_of() -> None:
    """The job starts each group of helpers by when it starts (plan.helper_plan.Starts); run/ names a helper only to
    tell the warm report what to report (run.report) or to start the feeder again for a restart (run.pipe_rewind)."""
    named = {(m, alias.name) for m in MODULES if m.startswith("smtrain.run.") for node in ast.walk(_tree(m))
             if isinstance(node, ast.ImportFrom) and (node.module or "").endswith("helper_plan")
             for alias in node.names}
    helpers = {name for _, name in named} - {"Starts", "cold_report", "companion"}
    assert helpers == {"REPORT", "FEEDER"}, sorted(named)


def test_each_role_consults_its_own_side_of_the_starters_policy() -> None:
    """The master asks the master's side (starters.policy.MasterSide), a worker a worker's (WorkerSide)."""
    from smtrain.starters.policy import MasterSide, WorkerSide

    for role, side in (("smtrain.run.master", MasterSide), ("smtrain.run.worker", WorkerSide)):
        asked = {node.attr for node in ast.walk(_tree(role)) if isinstance(node, ast.Attribute)
                 and isinstance(node.value, ast.Attribute) and node.value.attr == "policy"}
        asked |= {node.attr for node in ast.walk(_tree(role)) if isinstance(node, ast.Attribute)
                  and isinstance(node.value, ast.Name) and node.value.id == "policy"}
        assert asked and asked <= set(dir(side)), (role, sorted(asked - set(dir(side))))
