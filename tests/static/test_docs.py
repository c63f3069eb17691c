"""The documents against the code: the README's settings are the ones the code reads and its generated
tables what the declarations print, its minimal script is the example's, the changelog keeps its form, no
document carries a run diary or run log, every figure in a guide names the benchmark or test that measures
it, and every guide's code block is whole or says what it assumes. (Links, paths and module names in the
documents: tests/static/test_layers.py; all of it at once: scripts/check-docs.sh; that every documented
setting reaches the program under `train`: tests/process/test_internals.py; the README's quick start run as
written, in order: tests/sdk/test_readme_path.py.)"""
from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tests.support import README, documented_variables

REPO = Path(__file__).resolve().parent.parent.parent
# The user's guides: the README and the guides in docs/ (design.md and architecture.md are contributors')
GUIDES = [README, *sorted(p for p in (REPO / "docs").glob("*.md") if p.name not in ("design.md", "architecture.md"))]
USER_DOCUMENTS = [README, REPO / "CHANGELOG.md", REPO / "CONTRIBUTING.md", REPO / "benchmarks" / "README.md",
                  *sorted((REPO / "docs").glob("*.md"))]
SETTING = re.compile(r"\"((?:SM|SMTRAIN)_[A-Z0-9_]+)\"")


def _source(*globs: str) -> str:
    return "\n".join(p.read_text(encoding="utf-8") for g in globs for p in sorted(REPO.glob(g)))


def test_every_setting_the_code_reads_is_documented_and_every_documented_one_is_read() -> None:
    # where settings are declared (the package spells them nowhere else: tests/static/test_declared_once.py), and
    # the s3:// plugin, which reads its own
    read = set(SETTING.findall(_source("entrypoint/smtrain/config/settings.py")))
    read |= {n for n in SETTING.findall(_source("native/s3/**/*.cc")) if n.startswith("SMTRAIN_")}
    assert read - set(documented_variables()) == set(), "settings the code reads that the README does not document"
    everywhere = _source("entrypoint/**/*.py", "native/**/*.cc", "docker/*")
    unread = [n for n in documented_variables() if n not in everywhere]
    assert unread == [], f"settings the README documents that no code reads: {unread}"


def test_the_readmes_minimal_script_is_the_example() -> None:
    text = README.read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert (REPO / "examples" / "minimal" / "train.py").read_text(encoding="utf-8") in blocks


# Run histories, CI tallies and what was tried belong in an issue's note, not in the documents.
DIARY = re.compile(r"\b(?:this|the previous|an earlier|a later) session\b|\bissue \d+|\bin a probe\b|\ba probe\b|"
                   r"\bnot kept\b|\bci-local\b|\bclean[- ]clone\b|\b\d+ passed\b|\blent to this\b|\bthe lease\b|"
                   r"\bthe test machine\b|\bCI runs?\b|\bwhat has (?:not )?run\b|\bhas not (?:yet )?run\b|\bnot run\b|"
                   r"\brun for this release\b|\bbefore, it (?:was|did)\b|\bniced image build\b|\brunning beside it\b|"
                   r"\(was \S|\bwas \d", re.I)  # "(was 0.56 s)": a figure's history


def test_no_document_carries_a_run_diary() -> None:
    found = [f"{p.relative_to(REPO)}:{text.count(chr(10), 0, m.start()) + 1}: {m.group(0)}"
             for p in USER_DOCUMENTS for text in [p.read_text(encoding="utf-8")] for m in DIARY.finditer(text)]
    assert found == [], "\n".join(found)


DATE = re.compile(r"\b20\d\d-\d\d-\d\d\b")


def test_dates_only_head_the_changelogs_versions_and_the_benchmarks_runs() -> None:
    """A date says when a version was released or a benchmark last ran; anywhere else it is a diary's."""
    found = [f"{p.relative_to(REPO)}:{n}: {line[:80]}" for p in USER_DOCUMENTS if p.parent.name != "benchmarks"
             for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
             if DATE.search(line) and not (p.name == "CHANGELOG.md" and line.startswith("## ["))]
    assert found == [], "\n".join(found)


# A measured figure: "about 10 s", "0.99x", "1.7 GB/s", "9.4 us", "took 3 s", "0.17 % of", "2.1 s after".
MEASURED = re.compile(r"\babout \d|\b\d+(?:\.\d+)?x\b|[GM]B/s|\d ?us\b|\btook \d|\d+(?:\.\d+)? ?% of|"
                      r"\d+(?:\.\d+)? (?:min|ms|s) (?:after|from|to|in)\b")
MEASURED_BY = re.compile(r"bench_\w+\.py|\bfigure \w+")


def _readme_passages(text: str) -> list[str]:
    """The README's paragraphs and list items, each with the indented command block that follows it;
    tables and fenced code left out (settings and defaults, not measurements)."""
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    passages: list[str] = []
    for block in re.split(r"\n\s*\n|\n(?=- )", text):
        if block.startswith("    ") and passages:
            passages[-1] += "\n" + block
        elif not block.startswith(("|", "<!-- table:")):
            passages.append(block)
    return passages


@pytest.mark.parametrize("guide", GUIDES, ids=lambda p: p.name)
def test_every_figure_in_a_guide_names_what_measures_it(guide: Path) -> None:
    unnamed = [p[:160] for p in _readme_passages(guide.read_text(encoding="utf-8"))
               if MEASURED.search(p) and not MEASURED_BY.search(p)]
    assert unnamed == [], "figures without the benchmark or test that measures them:\n" + "\n".join(unnamed)


def test_the_changelog_keeps_a_changelogs_form_and_names_this_version() -> None:
    text = (REPO / "CHANGELOG.md").read_text(encoding="utf-8")
    versions = re.findall(r"^## \[(.+?)\](?: - (\d{4}-\d{2}-\d{2}))?$", text, re.M)
    assert versions[0] == ("Unreleased", "")
    assert all(re.fullmatch(r"\d+\.\d+\.\d+", v) and date for v, date in versions[1:]), versions
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    assert versions[1][0] == project
    kinds = set(re.findall(r"^### (.+)$", text, re.M))
    assert kinds <= {"Added", "Changed", "Deprecated", "Removed", "Fixed", "Security"}, kinds
    headings = [line for line in text.splitlines() if line.startswith("## ")]
    assert len(headings) == len(versions), headings  # no other second-level headings (no test runs)


def _undefined_names(code: str) -> set[str]:
    """Names a code block loads that nothing in it binds (imports, assignments, definitions, arguments,
    loop and `with` targets) and that are not builtins - what a reader who copies it would miss."""
    import ast
    import builtins

    tree = ast.parse(code)
    augmented = {id(n.target) for n in ast.walk(tree) if isinstance(n, ast.AugAssign)}  # `step += 1` binds nothing new
    bound, loaded = set(dir(builtins)), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            (loaded if isinstance(node.ctx, ast.Load) or id(node) in augmented else bound).add(node.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            bound |= {(alias.asname or alias.name).split(".")[0] for alias in node.names}
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bound.add(node.name)
    return loaded - bound


FRAGMENT = re.compile(r"# A fragment\b(.*?)(?=\n[^#])", re.S)


@pytest.mark.parametrize("guide", GUIDES, ids=lambda p: p.name)
def test_every_guide_code_block_is_complete_or_says_what_it_assumes(guide: Path) -> None:
    """A Python block defines every name it uses, or opens with `# A fragment: ...` naming each name it takes
    from the reader's script."""
    text = guide.read_text(encoding="utf-8")
    problems = []
    for match in re.finditer(r"```python\n(.*?)```", text, re.S):
        code, line = match.group(1), text.count("\n", 0, match.start()) + 1
        missing = _undefined_names(code)
        fragment = FRAGMENT.match(code)
        if fragment:
            said = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", fragment.group(1)))
            missing -= said
        if missing:
            problems.append(f"{guide.name}:{line}: {sorted(missing)} {'not named by the fragment' if fragment else 'undefined'}")
    assert problems == [], "\n".join(problems)


def test_the_undefined_name_check_finds_what_a_reader_would_miss() -> None:
    assert _undefined_names("import os\nfor i in range(3):\n    print(os.sep, i, step)\n") == {"step"}
    assert _undefined_names("for record in records:\n    step += 1\n") == {"records", "step"}
    assert _undefined_names("def f(a, *b, c=1, **d):\n    return a, b, c, d\nwith open('x') as g:\n    f(g)\n") == set()


def test_the_readmes_generated_tables_are_what_their_declarations_print() -> None:
    """The settings, program-environment, MPI and exit-status tables, and the control messages'
    (scripts/readme-tables.py --check): a row edited by hand, or a declaration changed without its page, fails here."""
    check = subprocess.run([sys.executable, str(REPO / "scripts" / "readme-tables.py"), "--check"],
                           capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    text = (REPO / "docs" / "reference.md").read_text(encoding="utf-8")
    for name in ("settings", "exit-statuses", "program-environment", "mpi-defaults"):
        assert text.count(f"<!-- table: {name} -->") == 1, name
    assert (REPO / "docs" / "architecture.md").read_text(encoding="utf-8").count("<!-- table: control-messages -->") == 1


LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def _slug(heading: str) -> str:
    """GitHub's anchor of a heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_every_link_between_the_documents_reaches_its_file_and_heading() -> None:
    """A relative link in a document names a file that exists and, with `#anchor`, one of its headings: moving
    a section (the README's guides and reference went to docs/) breaks no link silently."""
    broken = []
    for page in USER_DOCUMENTS + [REPO / "docs" / "design.md", REPO / "docs" / "architecture.md"]:
        for target in LINK.findall(page.read_text(encoding="utf-8")):
            if re.match(r"[a-z]+:", target):
                continue
            path, _, anchor = target.partition("#")
            file = (page.parent / path).resolve() if path else page
            if not file.exists():
                broken.append(f"{page.relative_to(REPO)}: {target} (no such file)")
            elif anchor and file.suffix == ".md" and anchor not in {
                    _slug(h) for h in re.findall(r"(?m)^#+ (.*)$", file.read_text(encoding="utf-8"))}:
                broken.append(f"{page.relative_to(REPO)}: {target} (no such heading)")
    assert broken == [], "\n".join(broken)


def test_the_readme_is_read_in_ten_minutes() -> None:
    """What it is, the quick start, the first SageMaker job and links: at most 3,000 words (code and tables included);
    the reference and the task guides have pages of their own."""
    words = len(README.read_text(encoding="utf-8").split())
    assert words <= 3000, f"README.md has {words} words: move reference or task detail to docs/"
