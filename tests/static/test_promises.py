"""The promise map (tests/static/promises.py) against the pages and the tests: every section of the user-facing
pages has its promises mapped to tests, or is named as instructions alone; every promise's words still stand
under its section; every test it names exists. A sentence rewritten, a section added, a test renamed or removed
without the map fails here."""
from __future__ import annotations

import ast
import re
from pathlib import Path

from tests.static.promises import INSTRUCTIONS, PROMISES

REPO = Path(__file__).resolve().parent.parent.parent
PAGES = ["README.md", *sorted(f"docs/{p.name}" for p in (REPO / "docs").glob("*.md")
                              if p.name not in ("design.md", "architecture.md"))]


def _sections(page: str) -> dict[str, str]:
    """Each heading of the page, to its text (up to the next heading of any level), whitespace folded."""
    text = re.sub(r"(?ms)^```.*?^```", "", (REPO / page).read_text(encoding="utf-8"))  # a code's comments are no headings
    parts = re.split(r"(?m)^#+ (.*)$", text)
    return {parts[i].strip(): _fold(parts[i + 1]) for i in range(1, len(parts), 2)}


def _fold(text: str) -> str:
    return " ".join(text.split())


def _tests() -> set[str]:
    found = set()
    for path in (REPO / "tests").rglob("test_*.py"):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.FunctionDef) and node.name.startswith("test_"):
                found.add(f"{path.relative_to(REPO)}::{node.name}")
    return found


def test_every_section_of_the_user_pages_is_mapped_to_its_tests_or_named_as_instructions() -> None:
    covered = {(p.page, p.section) for p in PROMISES} | set(INSTRUCTIONS)
    missing = [f"{page}: {heading}" for page in PAGES for heading in _sections(page) if (page, heading) not in covered]
    assert missing == [], "sections with no promise mapped and not named as instructions:\n" + "\n".join(missing)
    gone = sorted(f"{page}: {heading}" for page, heading in covered if heading not in _sections(page))
    assert gone == [], "the map names sections the pages no longer have:\n" + "\n".join(gone)


def test_every_promises_words_stand_under_its_section_and_its_tests_exist() -> None:
    tests = _tests()
    wrong = []
    for p in PROMISES:
        text = _sections(p.page).get(p.section, "")
        if _fold(p.words) not in text:
            wrong.append(f"{p.page}: {p.section}: no longer says {p.words!r}")
        if not p.tests:
            wrong.append(f"{p.page}: {p.section}: {p.words!r} has no test")
        wrong += [f"{p.page}: {p.section}: no test {t}" for t in p.tests if t not in tests]
    assert wrong == [], "\n".join(wrong)
