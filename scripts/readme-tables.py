"""The documents' generated tables, each between `<!-- table: NAME -->` and `<!-- /table -->`, rewritten from
the code that holds them. docs/reference.md: the settings (smtrain.config.settings), the exit statuses
(smtrain.errors), what the image adds to the program's environment (smtrain.config.program_env), and what `train`
passes to mpirun and sets for NCCL and EFA (smtrain.plan.mpirun_command's own function, run on sample hosts).
docs/architecture.md: the control channel's messages (smtrain.wire.control_protocol).
`python scripts/readme-tables.py` rewrites both pages; `--check` exits 1, naming the tables that differ, where a
page is not what they print (tests/static/test_docs.py runs the check)."""
from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Callable

DOCS = Path(__file__).resolve().parent.parent / "docs"
PAGES = (DOCS / "reference.md", DOCS / "architecture.md")  # the pages with generated tables
BLOCK = re.compile(r"(<!-- table: (?P<name>[a-z-]+) -->\n)(?P<body>.*?)(<!-- /table -->)", re.S)


def mpi_table() -> str:
    """mpirun's options and the ranks' network variables `train` sets, by what the host has: mpirun_command on
    a 2-host job of 2 ranks a host, once for each kind of host."""
    from smtrain.config.model import NetworkFacts
    from smtrain.plan.mpirun_command import layout, mpirun_command

    hosts = ("algo-1", "algo-2")
    kinds = {
        "without EFA (`ml.c5.4xlarge`)": ("ml.c5.4xlarge", NetworkFacts(("eth0", "lo"), "eth0", False), 8),
        "EFA, device RDMA (`ml.p4d.24xlarge`)": ("ml.p4d.24xlarge", NetworkFacts(("eth0", "lo"), "eth0", True, True), 0),
        "EFA, other types, NCCL's EFA plugin": ("ml.g5.48xlarge", NetworkFacts(("eth0", "lo"), "eth0", True, True), 0),
        "EFA, no plugin": ("ml.g5.48xlarge", NetworkFacts(("eth0", "lo"), "eth0", True, False), 0),
    }
    columns: dict[str, dict[str, str]] = {}
    for kind, (instance, network, cpus) in kinds.items():
        command = mpirun_command(layout(hosts, 2, None, 0), "algo-1", "eth0", instance, network, {}, (),
                                 ("python",), cpus_per_rank=cpus)
        argv, values = list(command.argv), {}
        i = argv.index("-np") + 2
        while i < len(argv) and argv[i] != "python":
            flag = argv[i]
            if flag == "--mca":
                values[f"--mca {argv[i + 1]}"], i = argv[i + 2], i + 3
            elif flag == "-x":
                values[argv[i + 1]], i = command.env[argv[i + 1]], i + 2
            elif i + 1 < len(argv) and not argv[i + 1].startswith("-") and argv[i + 1] != "python":
                values[flag], i = argv[i + 1], i + 2
            else:
                values[flag], i = "(set)", i + 1
        columns[kind] = values
    names = list(dict.fromkeys(name for values in columns.values() for name in values))
    rows = ["| option / variable | " + " | ".join(columns) + " |", "| --- |" + " --- |" * len(columns)]
    rows += [f"| `{name}` | " + " | ".join(f"`{v[name]}`" if name in v else "-" for v in columns.values()) + " |"
             for name in names]
    return "\n".join(rows) + "\n"


def tables() -> dict[str, Callable[[], str]]:
    """Every generated table, by name."""
    from smtrain.config.settings import markdown_table as settings_table
    from smtrain.errors import markdown_table as exit_table
    from smtrain.wire.control_protocol import markdown_table as messages_table
    from smtrain.config.program_env import markdown_table as environment_table

    return {"settings": settings_table, "exit-statuses": exit_table, "program-environment": environment_table,
            "mpi-defaults": mpi_table, "control-messages": messages_table}


def rewritten(text: str, page: str = "docs/reference.md") -> tuple[str, list[str]]:
    """`text` with every generated table as its declaration prints it, and the names of those that changed."""
    makers, changed = tables(), []

    def one(match: re.Match) -> str:
        name = match.group("name")
        if name not in makers:
            raise SystemExit(f"{page}: no generated table named {name!r} (known: {', '.join(makers)})")
        body = makers[name]()
        if body != match.group("body"):
            changed.append(name)
        return match.group(1) + body + match.group(4)

    return BLOCK.sub(one, text), changed


def main(argv: list[str]) -> int:
    status = 0
    for path in PAGES:
        page = f"docs/{path.name}"
        new, changed = rewritten(path.read_text(encoding="utf-8"), page)
        if "--check" in argv:
            if changed:
                print(f"{page}: generated tables differ from their declarations: {', '.join(changed)} "
                      "(run python scripts/readme-tables.py)")
                status = 1
            continue
        path.write_text(new, encoding="utf-8")
        print(f"{page}: {', '.join(changed) or 'no'} table(s) rewritten")
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
