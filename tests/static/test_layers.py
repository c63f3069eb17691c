"""The package's shape, read from the source (no imports run): imports only point down the layers
docs/architecture.md draws, no modules import each other in a loop, every module lists its
public names in `__all__`, and every path or module named in docs, docstrings and comments exists."""
from __future__ import annotations

import ast
import re
from functools import lru_cache
from pathlib import Path
from typing import Iterator, Optional

import pytest

REPO = Path(__file__).resolve().parent.parent.parent
SOURCE = REPO / "entrypoint"

# Bottom to top. A module may import modules of lower layers, and of its own unit (the first name
# after `smtrain.`, or `sagemaker_tensorflow`); nothing of a higher layer, nor of another unit of its own.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("smtrain", "smtrain.common", "smtrain.errors", "smtrain.wire"),  # standard library only
    ("smtrain.config",),
    ("smtrain.data", "smtrain.proc", "smtrain.sync"),
    ("smtrain.plan", "smtrain.progress", "smtrain.profiler"),
    ("smtrain.pipes", "smtrain.metrics", "smtrain.s3", "smtrain.horovod_keras"),  # the user API, in the order its modules use each other
    ("smtrain.checkpoints", "sagemaker_tensorflow"),
    ("smtrain.callbacks", "smtrain.rank"),
    ("smtrain.starters",),  # the ways ranks start: the plan holds a starter's spec, run/'s roles consult its policy
    ("smtrain.run",),
    ("smtrain.cli",),
    ("smtrain.__main__",),
)


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SOURCE).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES: dict[str, Path] = {_module_name(p): p for p in sorted(SOURCE.rglob("*.py"))}


@lru_cache(maxsize=None)
def _tree(name: str) -> ast.Module:
    return ast.parse(MODULES[name].read_text(), str(MODULES[name]))


def _imports(name: str) -> set[str]:
    """The project's modules that `name` imports anywhere in its file (functions and TYPE_CHECKING blocks too)."""
    path = MODULES[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(_tree(name)):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for alias in node.names:
                full = f"{target}.{alias.name}"
                found.add(full if full in MODULES else target)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {m for m in found if m in MODULES and m != name}


def _unit(name: str) -> str:
    parts = name.split(".")
    return ".".join(parts[:2]) if parts[0] == "smtrain" and len(parts) > 1 else parts[0]


def _layer(name: str) -> int:
    unit = _unit(name)
    for index, units in enumerate(LAYERS):
        if unit in units:
            return index
    raise AssertionError(f"{name}: its unit {unit} is in no layer of LAYERS")


def test_every_module_is_in_a_layer_and_imports_only_point_down() -> None:
    upward = []
    for name in MODULES:
        for target in _imports(name):
            if _unit(target) != _unit(name) and _layer(target) >= _layer(name):
                upward.append(f"{name} -> {target}")
    assert upward == [], "imports that do not point down:\n" + "\n".join(sorted(upward))


def test_no_module_name_is_reused_across_the_package() -> None:
    """A module's name says its layer's thing: `wire.rank_failure`, not a second `report`. One pair shares
    a name because it is one thing: the kind of a program on its own and the role body that runs it."""
    by_name: dict[str, list[str]] = {}
    for name in MODULES:
        last = name.rsplit(".", 1)[-1]
        if last not in ("__init__", "__main__") and name.startswith("smtrain."):
            by_name.setdefault(last, []).append(name)
    assert {k: v for k, v in by_name.items() if len(v) > 1} == {"single": ["smtrain.plan.kinds.single", "smtrain.run.single"]}


def docstring_ids(tree: ast.Module) -> set[int]:
    """The ids of the docstrings' constants in `tree` (module, classes, functions)."""
    return {id(node.body[0].value) for node in ast.walk(tree)
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body
            and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}


def _code_words(name: str) -> set[str]:
    """The identifiers and the string constants (not docstrings) of a module's code, lower-cased."""
    docstrings = docstring_ids(_tree(name))
    words: set[str] = set()
    for node in ast.walk(_tree(name)):
        if isinstance(node, ast.Name):
            words.add(node.id.lower())
        elif isinstance(node, ast.Attribute):
            words.add(node.attr.lower())
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef)):
            words.add(node.name.lower())
        elif isinstance(node, ast.alias):
            words.update(part.lower() for part in (node.name, node.asname or "") if part)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            words.add(node.value.lower())
    return words


def test_each_distribution_kind_is_named_by_its_module_and_the_kinds_table_alone() -> None:
    """One distribution kind in one place: its module in plan/kinds and its row in the table
    (plan.kinds.KINDS) - config, the shape and run/ work without naming it. The hyperparameter that turns it on is
    a setting, declared with the others (config.settings), which the kind's module reads."""
    words = {"parameter_server": ("parameter_server", "ps"), "multi_worker_mirrored": ("multi_worker_mirrored", "mwms")}
    for module, names in words.items():
        naming = sorted(name for name in MODULES
                        if any(w == n or w.startswith(n + "_") or w.endswith("_" + n) for w in _code_words(name) for n in names))
        assert naming == sorted({f"smtrain.plan.kinds.{module}", "smtrain.plan.kinds", "smtrain.config.settings"}), \
            (module, naming)


def test_no_modules_import_each_other_in_a_loop() -> None:
    graph = {name: _imports(name) for name in MODULES}
    loops: list[list[str]] = []
    state: dict[str, int] = {}  # 1: on the path, 2: done

    def visit(name: str, path: list[str]) -> None:
        state[name] = 1
        for target in sorted(graph[name]):
            if state.get(target) == 1:
                loops.append(path[path.index(target):] + [target])
            elif target not in state:
                visit(target, path + [target])
        state[name] = 2

    for name in sorted(graph):
        if name not in state:
            visit(name, [name])
    assert loops == [], "import loops:\n" + "\n".join(" -> ".join(loop) for loop in loops)


def _defined_names(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(t.id for t in targets if isinstance(t, ast.Name))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.If):  # e.g. TYPE_CHECKING blocks
            names.update(_defined_names(ast.Module(body=node.body, type_ignores=[])))
    return names


def _static_all(tree: ast.Module) -> Optional[list[str]]:
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        if targets and node.value is not None and any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
            value = ast.literal_eval(node.value)
            assert isinstance(value, list) and all(isinstance(v, str) for v in value)
            return value
    return None


# Modules that are programs, not libraries: run as `python -m` or loaded by the interpreter itself.
PROGRAMS = {"smtrain.__main__", "smtrain.rank.__main__", "smtrain.rank.startup.sitecustomize", "smtrain.run.tfserver"}


def test_every_module_lists_its_public_names_in_a_static_all_and_each_exists() -> None:
    missing, unknown = [], []
    for name in sorted(set(MODULES) - PROGRAMS):
        tree = _tree(name)
        names = _static_all(tree)
        if names is None:
            missing.append(name)
            continue
        is_package = MODULES[name].name == "__init__.py"
        for public in names:
            if public in _defined_names(tree) or _lazy(name, public):
                continue
            if is_package and f"{name}.{public}" in MODULES:  # a package lists its submodules
                continue
            unknown.append(f"{name}.{public}")
    assert missing == [], f"modules without __all__: {missing}"
    assert unknown == [], f"names in __all__ that the module does not define: {unknown}"


def test_nine_in_ten_public_names_have_a_docstring() -> None:
    """Public functions and classes (those a module's __all__ lists) say what they are for."""
    public = without = 0
    bare = []
    for name in MODULES:
        tree = _tree(name)
        listed = _static_all(tree)
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and listed is not None and node.name in listed:
                public += 1
                if not ast.get_docstring(node):
                    without += 1
                    bare.append(f"{name}.{node.name}")
    assert public > 300 and without <= public // 10, f"{without} of {public} without a docstring: {bare}"


# -- names in docs, docstrings and comments -----------------------------------------------------------------
TEXT_FILES = [REPO / "README.md", REPO / "CHANGELOG.md", REPO / "CONTRIBUTING.md",
              *sorted(p for folder in ("entrypoint", "tests", "benchmarks", "scripts", "examples", "docker", "docs")
                      for p in (REPO / folder).rglob("*") if p.suffix in (".py", ".sh", ".md", ".cc") and "__pycache__" not in p.parts),
              REPO / "native" / "pipe_dataset.cc", REPO / "Dockerfile", REPO / "buildspec.yml"]
REPO_PATH = re.compile(r"(?<![\w./-])((?:entrypoint|scripts|benchmarks|tests|examples|docker|native|requirements|docs|\.ci)"
                       r"/[\w./-]*\w)")
DOTTED = re.compile(r"(?<![\w./])((?:smtrain|sagemaker_tensorflow)(?:\.\w+)+)")


def _mentions(pattern: re.Pattern[str]) -> Iterator[tuple[str, str]]:
    for path in TEXT_FILES:
        if path == Path(__file__):
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        for match in pattern.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            yield f"{path.relative_to(REPO)}:{line}", match.group(1)


def test_every_repository_path_named_in_docs_docstrings_and_comments_exists() -> None:
    dead = [f"{where}: {named}" for where, named in _mentions(REPO_PATH)
            if not (REPO / named.rstrip(".")).exists() and "*" not in named]
    assert dead == [], "paths that do not exist:\n" + "\n".join(dead)


def test_no_file_cites_a_document_outside_the_repository() -> None:
    outside = [f"{where}: {named}" for where, named in _mentions(re.compile(r"((?:\.\./)?shared/(?:DESIGN|STYLE)\.md)"))]
    assert outside == [], "citations of files outside the repository:\n" + "\n".join(outside)


def _lazy(package: str, public: str) -> bool:
    """A name a package serves from a submodule through its module `__getattr__` (no work at import time)."""
    if "__getattr__" not in _defined_names(_tree(package)) or MODULES[package].name != "__init__.py":
        return False
    return any(public in _defined_names(_tree(m)) for m in MODULES if m.rpartition(".")[0] == package)


def _resolves(dotted: str) -> bool:
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        module = ".".join(parts[:cut])
        if module in MODULES:
            rest = parts[cut:]
            if not rest:
                return True
            if rest[0] in _defined_names(_tree(module)) or _lazy(module, rest[0]):
                return True
            return f"{module}.{rest[0]}" in MODULES
    return False


def test_every_module_or_name_of_the_package_named_in_docs_exists() -> None:
    dead = sorted({f"{where}: {named}" for where, named in _mentions(DOTTED) if not _resolves(named.rstrip("."))})
    assert dead == [], "modules or names that do not exist:\n" + "\n".join(dead)


# -- links between the documents --------------------------------------------------------------------------------
DOCUMENTS = [REPO / "README.md", REPO / "CHANGELOG.md", REPO / "CONTRIBUTING.md", REPO / "benchmarks" / "README.md", *sorted((REPO / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")


def _anchors(path: Path) -> set[str]:
    """GitHub's anchors of a Markdown file's headings."""
    slugs = set()
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("#"):
            title = line.lstrip("#").strip().lower()
            slugs.add(re.sub(r"[^\w\- ]", "", title).replace(" ", "-"))
    return slugs


def test_every_link_between_the_documents_leads_somewhere() -> None:
    dead = []
    for document in DOCUMENTS:
        for match in LINK.finditer(document.read_text(encoding="utf-8")):
            target = match.group(1)
            if target.startswith(("http://", "https://", "mailto:")):
                continue
            file, _, anchor = target.partition("#")
            path = (document.parent / file).resolve() if file else document
            if not path.exists():
                dead.append(f"{document.relative_to(REPO)}: {target} (no such file)")
            elif anchor and path.suffix == ".md" and anchor not in _anchors(path):
                dead.append(f"{document.relative_to(REPO)}: {target} (no such heading)")
    assert dead == [], "links that lead nowhere:\n" + "\n".join(dead)


# -- the size of things ------------------------------------------------------------------------------------------
def _functions(tree: ast.Module) -> Iterator[ast.FunctionDef | ast.AsyncFunctionDef]:
    return (n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)))


def test_no_function_is_longer_than_80_lines() -> None:
    """A reader follows a function on one screen or two (nested functions count in their parent)."""
    long = [f"{name}.{f.name}: {f.end_lineno - f.lineno + 1} lines" for name in MODULES if name.startswith("smtrain")
            for f in _functions(_tree(name)) if f.end_lineno - f.lineno + 1 > 80]  # type: ignore[operator]
    assert long == []


def test_no_module_is_longer_than_350_lines() -> None:
    """A module has one job a reader takes in at once; past 350 lines it has more than one."""
    long = [f"{name}: {len(MODULES[name].read_text().splitlines())} lines" for name in MODULES
            if name.startswith("smtrain") and len(MODULES[name].read_text().splitlines()) > 350]
    assert long == []


def test_85_in_100_public_methods_have_a_docstring() -> None:
    """Public methods of public classes say what they are for; an override is documented by the
    method it overrides in a class of the package (as `inspect.getdoc` reads it)."""
    classes = {node.name: node for name in MODULES for node in _tree(name).body if isinstance(node, ast.ClassDef)}

    def documented(cls: ast.ClassDef, method: str) -> bool:
        for node in cls.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == method and ast.get_docstring(node):
                return True
        return any(documented(classes[b.id], method) for b in cls.bases if isinstance(b, ast.Name) and b.id in classes)

    public = bare = 0
    for name in MODULES:
        for cls in (n for n in _tree(name).body if isinstance(n, ast.ClassDef) and not n.name.startswith("_")):
            for method in (n for n in cls.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))):
                if not method.name.startswith("_"):
                    public += 1
                    bare += not documented(cls, method.name)
    assert public > 300 and bare <= public * 15 // 100, f"{bare} of {public} public methods without a docstring"


def test_checkpoint_storage_takes_no_signal_and_calls_no_collective() -> None:
    """The checkpoints package splits by job: the store and its writer touch no signal and no
    Horovod collective; the stop flag and the collectives write no file."""
    storage = ("smtrain.checkpoints.store", "smtrain.checkpoints.background", "smtrain.checkpoints.positions")
    for name in storage:
        words = _code_words(name)
        assert not {"signal", "running_horovod", "allreduce", "allgather_object", "broadcast_object"} & words, name
    for name in ("smtrain.checkpoints.stop", "smtrain.checkpoints.shared"):
        assert not {"write_bytes", "fsync", "rename", "rmtree"} & _code_words(name), name


# -- how ranks start -----------------------------------------------------------------------------------------
MPI_WORD = re.compile(r"mpirun|sshd|ompi_|(?<![a-z])ssh")
# Where MPI and its ssh machinery may be named: the kind, the mpirun command (also who a rank is, as mpirun says
# it, which the rank contract hands the rank launcher), the starter's own package (its sshd, keys and held
# connections) and the key format on the wire.
MPI_HOMES = ("smtrain.plan.kinds.mpi", "smtrain.plan.mpirun_command", "smtrain.starters", "smtrain.wire.ssh_trust")


def _all_strings(name: str) -> set[int]:
    """The string constants of a module's `__all__` (a package naming its submodules names no tool)."""
    return {id(c) for node in _tree(name).body if isinstance(node, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets)
            for c in ast.walk(node.value) if isinstance(c, ast.Constant)}


def _home(name: str) -> str:
    return next((home for home in MPI_HOMES if name == home or name.startswith(home + ".")), name)


# The declaration tables: one row per setting, failure cause, control message, program or variable a program
# gets, each naming what it is about - MPI's too - as data; no logic lives there.
DECLARATIONS = ("smtrain.config.settings", "smtrain.errors", "smtrain.wire.control_protocol", "smtrain.wire.programs",
                "smtrain.config.program_env")


def test_mpi_is_named_in_four_homes_at_most() -> None:
    """MPI (mpirun, sshd, ssh, OMPI_) in code - identifiers and strings, not docstrings, comments or
    `__all__` - only in its homes, a package counted once (the declaration tables aside)."""
    naming = set()
    for name in set(MODULES) - set(DECLARATIONS):
        skip = _all_strings(name)
        words = {w for w in _code_words(name)} - {c.value.lower() for c in ast.walk(_tree(name))
                                                   if isinstance(c, ast.Constant) and id(c) in skip}
        if any(MPI_WORD.search(w) for w in words):
            naming.add(_home(name))
    assert naming <= set(MPI_HOMES) and len(naming) <= 4, sorted(naming - set(MPI_HOMES))


def _starter_reads(tree: ast.Module) -> tuple[set[ast.AST], set[str]]:
    """The expressions of `tree` that read the rank starter's spec or policy, or a value of either (not a call
    of one of the policy's steps: `...policy.admit(...)` is a step; `...policy.spec`, `...starter`, `...policy`
    themselves are reads), and the names bound to such a read, through any number of assignments."""
    called = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    receivers = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Attribute) and id(n) in called}
    arguments = {id(a) for n in ast.walk(tree) if isinstance(n, ast.Call) for a in n.args}
    words = ("starter", "policy")

    def of_starter(node: ast.AST) -> bool:
        while isinstance(node, ast.Attribute):
            if node.attr in words:
                return True
            node = node.value
        return isinstance(node, ast.Name) and node.id in words

    def is_read(node: ast.AST, bound: set[str]) -> bool:
        """A value of the starter: not a step called on it, not a name being bound, not the spec handed to
        `master_policy` / `worker_policy`."""
        if id(node) in called or id(node) in receivers or id(node) in arguments:
            return False
        if isinstance(node, ast.Name):
            return isinstance(node.ctx, ast.Load) and (node.id in bound or node.id in words)
        return isinstance(node, ast.Attribute) and of_starter(node)

    bound: set[str] = set()
    while True:
        more = set(bound)
        for node in ast.walk(tree):
            if isinstance(node, (ast.Assign, ast.AnnAssign, ast.NamedExpr)) and node.value is not None:
                if any(is_read(n, bound) for n in ast.walk(node.value)):
                    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                    more |= {n.id for t in targets for n in ([t] if isinstance(t, ast.Name) else getattr(t, "elts", []))
                             if isinstance(n, ast.Name) and n.id not in words}
        if more == bound:
            return {n for n in ast.walk(tree) if is_read(n, bound)}, bound
        bound = more


ROLES = ("smtrain.run.master", "smtrain.run.worker")
# what the roles may name of smtrain.starters: the registry's one function and the data a policy takes or returns
STARTER_DATA = {"master_policy", "worker_policy", "TaskNews", "AfterProgram", "MasterSide", "WorkerSide"}


def test_master_and_worker_branch_on_no_way_of_starting_ranks() -> None:
    """The roles consult the rank starter's policy (smtrain.starters.policy: each role its side) for its decisions: no
    condition of theirs reads the spec, the policy or a value of either (directly, or through names bound to
    one) - only what a step returns - and they name no starter of their own."""
    starters = {node.name for name in MODULES if name.startswith("smtrain.starters.") for node in _tree(name).body
                if isinstance(node, ast.ClassDef)}
    for name in ROLES:
        tree = _tree(name)
        reads, bound = _starter_reads(tree)
        tests = [n.test for n in ast.walk(tree) if isinstance(n, (ast.If, ast.While, ast.IfExp, ast.Assert))]
        tests += [cond for n in ast.walk(tree) if isinstance(n, ast.comprehension) for cond in n.ifs]
        read = [ast.unparse(t) for t in tests if any(n in reads for n in ast.walk(t))]
        assert read == [], (name, read)
        named = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} & (starters - STARTER_DATA)
        assert named == set(), (name, named)


def test_no_starter_calls_back_into_a_role() -> None:
    """A starter's steps take data and return data: nothing in smtrain.starters takes a role (a parameter
    named for one, or a Protocol of what a role offers), and the roles hand a step none of themselves."""
    for name in (n for n in MODULES if n.startswith("smtrain.starters")):
        for node in ast.walk(_tree(name)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                params = {a.arg for a in (*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs)}
                assert not params & {"master", "worker", "role"}, (name, node.name, params)
            if isinstance(node, ast.ClassDef):
                assert "Protocol" not in {ast.unparse(b) for b in node.bases}, (name, node.name)
    for name in ROLES:
        handed = [ast.unparse(c) for c in ast.walk(_tree(name)) if isinstance(c, ast.Call)
                  and isinstance(c.func, ast.Attribute) and ast.unparse(c.func).startswith("self.policy.")
                  and any(isinstance(a, ast.Name) and a.id == "self" for a in [*c.args, *(k.value for k in c.keywords)])]
        assert handed == [], (name, handed)


def _is_self(node: ast.AST) -> bool:
    return isinstance(node, ast.Name) and node.id == "self"


def _self_assignments(tree: ast.Module, cls: str) -> list[tuple[str, str]]:
    """(method, attribute) of every `self.attribute = ...` (or +=, or annotated) in class `cls`'s methods, and of
    every other way to set one: `setattr(self, ...)`, `object.__setattr__(self, ...)`, `self.__dict__[...] = ...`,
    `vars(self)[...] = ...` or `self.__dict__.update(...)` (named `<dynamic>`)."""
    found = []
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == cls:
            for method in (m for m in node.body if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef))):
                for n in ast.walk(method):
                    targets = n.targets if isinstance(n, ast.Assign) else [n.target] if isinstance(
                        n, (ast.AugAssign, ast.AnnAssign)) else []
                    for t in targets:
                        for e in (t.elts if isinstance(t, ast.Tuple) else [t]):
                            if isinstance(e, ast.Attribute) and _is_self(e.value):
                                found.append((method.name, e.attr))
                            elif isinstance(e, ast.Subscript) and ast.unparse(e.value) in ("self.__dict__", "vars(self)"):
                                found.append((method.name, "<dynamic>"))
                    if isinstance(n, ast.Call) and n.args and _is_self(n.args[0]) and ast.unparse(n.func) in (
                            "setattr", "object.__setattr__"):
                        found.append((method.name, "<dynamic>"))
                    elif isinstance(n, ast.Call) and ast.unparse(n.func) in ("self.__dict__.update", "vars(self).update"):
                        found.append((method.name, "<dynamic>"))
    return found


@pytest.mark.parametrize("body", ["setattr(self, 'late', 1)", "object.__setattr__(self, 'late', 1)",
                                  "self.__dict__['late'] = 1", "vars(self)['late'] = 1", "self.__dict__.update(late=1)",
                                  "self.late += 1", "self.a, self.late = 1, 2"])
def test_the_role_attribute_check_sees_every_way_to_set_one(body: str) -> None:
    tree = ast.parse(f"class Role:\n    def __init__(self):\n        self.a = 0\n    def later(self):\n        {body}\n")
    assert ("later", "<dynamic>") in _self_assignments(tree, "Role") or ("later", "late") in _self_assignments(tree, "Role")


def test_no_attribute_of_a_role_is_assigned_outside_its_init() -> None:
    """A role's state is what `__init__` makes; an attempt's lives in its `Attempt` (run.attempt), a host's in
    the control server's records: nothing is reset by hand between attempts."""
    for name, cls in (("smtrain.run.master", "Master"), ("smtrain.run.worker", "Worker")):
        assigned = _self_assignments(_tree(name), cls)
        assert assigned and {m for m, _ in assigned} == {"__init__"}, (name, [a for a in assigned if a[0] != "__init__"])


def test_restart_in_place_is_named_in_four_modules_of_run_and_the_starters_at_most() -> None:
    """Restart in place has one home (run.attempts: the rule, the attempts, making the hosts ready); the
    roles speak of attempts. Its code words (identifiers and strings, not docstrings) name it elsewhere only
    where a message of it is handled (run.link)."""
    naming = sorted(name for name in MODULES if name.startswith(("smtrain.run", "smtrain.starters"))
                    and any("restart" in w for w in _code_words(name)))
    assert len(naming) <= 4, naming


def _shadowed(tree: ast.Module) -> list[str]:
    """`self.<name> = ...` where <name> is a method of the same class: the assignment hides the method."""
    found = []
    for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
        methods = {f.name for f in cls.body if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))}
        found += [f"{cls.name}.{n.attr} (line {n.lineno})" for n in ast.walk(cls)
                  if isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Store) and isinstance(n.value, ast.Name)
                  and n.value.id == "self" and n.attr in methods]
    return found


def test_no_attribute_hides_a_method_of_its_class() -> None:
    """An instance attribute named like a method of its class replaces it for every caller - as the control
    server's PROGRESS handler was once replaced by a function stored under its name, and no rank's progress
    counted."""
    assert _shadowed(ast.parse("class A:\n    def f(self):\n        self.g = 1\n    def g(self):\n        pass\n")) \
        == ["A.g (line 3)"]
    assert [f"{name}: {s}" for name in MODULES for s in _shadowed(_tree(name))] == []
