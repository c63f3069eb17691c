"""Exit status passthrough, signal deaths, the failure and success files, program kinds."""
from __future__ import annotations

import signal
from pathlib import Path

import pytest

from tests.support import make_tree, run_train


@pytest.mark.parametrize("status", [0, 1, 3, 42, 255])
def test_exit_status_passes_through(tmp_path: Path, status: int) -> None:
    tree = make_tree(tmp_path)
    tree.write_program("train.py", f"import sys\nsys.exit({status})\n")
    assert run_train(tree).returncode == status
    assert tree.failure.exists() == (status != 0)
    assert (tree.base / "output" / "success").exists() == (status == 0)
    assert (tree.base / "model").is_dir() and (tree.base / "output" / "data").is_dir()  # as SageMaker provides


@pytest.mark.parametrize("signum", [signal.SIGSEGV, signal.SIGKILL, signal.SIGABRT])
def test_signal_death_is_128_plus_n(tmp_path: Path, signum: int) -> None:
    tree = make_tree(tmp_path)
    tree.write_program("train.py", f"import os\nos.kill(os.getpid(), {int(signum)})\n")
    done = run_train(tree)
    assert done.returncode == 128 + signum
    text = tree.failure.read_text()
    assert text.startswith("ProgramKilled: ") and signal.Signals(signum).name in text
    assert "OutOfMemory" not in text  # a plain SIGKILL is not reported as an OOM kill


@pytest.mark.parametrize("signum", [signal.SIGSEGV, signal.SIGILL])
def test_an_uncaught_exception_then_a_crash_in_teardown_ends_with_status_1(tmp_path: Path, signum: int) -> None:
    """As TensorFlow's gRPC server does by chance: the program raised, and the interpreter then died of
    a signal while it shut down (faulthandler's dump after the traceback). Status 1 every time."""
    tree = make_tree(tmp_path)
    tree.write_program("train.py", "import atexit, faulthandler, os\nfaulthandler.enable()\n"
                                   f"atexit.register(lambda: os.kill(os.getpid(), {int(signum)}))\n"
                                   "raise RuntimeError('failed on purpose')\n")
    done = run_train(tree)
    assert done.returncode == 1, done.stderr.decode()[-2000:]
    assert b"Fatal Python error" in done.stderr  # the crash happened, after the traceback
    text = tree.failure.read_text()
    assert text.startswith(f"RuntimeError: program {tree.base / 'code' / 'train.py'} raised an uncaught RuntimeError "
                           f"(status 1); the interpreter then died of {signal.Signals(signum).name} while it shut down "
                           f"(exit status {128 + signum})"), text
    assert text.rstrip().endswith("RuntimeError: failed on purpose")  # the traceback, not the crash dump


def test_failure_file_names_the_exception_and_keeps_the_stderr_tail(tmp_path: Path) -> None:
    tree = make_tree(tmp_path)
    tree.write_program("train.py", "import sys\nfor i in range(500):\n    print('noise line', i, file=sys.stderr)\n"
                                   "raise ValueError('learning rate must be positive')\n")
    done = run_train(tree)
    assert done.returncode == 1
    raw = tree.failure.read_bytes()
    assert len(raw) <= 1024
    text = raw.decode()
    assert text.startswith("ValueError: program ")
    assert text.rstrip().endswith("ValueError: learning rate must be positive")
    assert "noise line 499" in text and "noise line 0\n" not in text


def test_program_written_failure_file_is_kept(tmp_path: Path) -> None:
    tree = make_tree(tmp_path)
    tree.write_program("train.py", "import os, sys\nos.makedirs(os.path.dirname(sys.argv[2]), exist_ok=True)\n"
                                   "open(sys.argv[2], 'w').write('my own reason')\nsys.exit(2)\n")
    tree.write_config("hyperparameters.json", {"sagemaker_program": '"train.py"', "failure": f'"{tree.failure}"'})
    assert run_train(tree).returncode == 2
    assert tree.failure.read_text() == "my own reason"


def test_stale_failure_file_from_an_earlier_run_is_replaced(tmp_path: Path) -> None:
    tree = make_tree(tmp_path)
    tree.failure.parent.mkdir(parents=True)
    tree.failure.write_text("old reason")
    tree.write_program("train.py", "raise SystemExit(4)\n")
    assert run_train(tree).returncode == 4
    assert tree.failure.read_text().startswith("ProgramError: ")


def test_what_an_earlier_job_left_that_would_mislead_this_one_is_removed_before_the_program(tmp_path: Path) -> None:
    """PipeModeDataset's epoch counts and the demultiplexers' FIFO folder from an earlier job on this host
    (plan.launch's `cleared`) are gone before the program starts."""
    from smtrain.wire.pipe_assignment import demux_folder

    tree = make_tree(tmp_path)
    stale = [tree.base / "pipe_state", demux_folder(tree.base / "input" / "data")]
    for folder in stale:
        folder.mkdir(parents=True)
        (folder / "left").write_text("by an earlier job")
    tree.write_program("train.py", f"import os, sys\nsys.exit(sum(os.path.exists(p) for p in {[str(p) for p in stale]!r}))\n")
    assert run_train(tree).returncode == 0
    assert not any(folder.exists() for folder in stale)


def test_shell_and_executable_programs(tmp_path: Path) -> None:
    tree = make_tree(tmp_path, program="run.sh", hyperparameters={"n": "5"})
    tree.write_program("run.sh", 'echo "bash ${BASH_VERSION%%.*} got $*"; exit 7\n')
    done = run_train(tree)
    assert done.returncode == 7
    assert done.stdout.decode() == "bash 5 got -n 5\n"  # one-letter names get one dash

    tree = make_tree(tmp_path / "exe", program="run")
    tree.write_program("run", "#!/bin/sh\necho direct \"$@\"\n", mode=0o755)
    done = run_train(tree)
    assert done.returncode == 0 and done.stdout == b"direct\n"


def test_stdin_stdout_are_the_programs_own(tmp_path: Path) -> None:
    """stdout goes straight to the container's stdout: byte for byte, nothing added by `train`."""
    tree = make_tree(tmp_path)
    tree.write_program("train.py", "import sys\nsys.stdout.write('a\\r\\nb=1;\\n\\nlast without newline')\n")
    done = run_train(tree)
    assert done.returncode == 0
    assert done.stdout == b"a\r\nb=1;\n\nlast without newline"


def test_code_from_a_local_tarball_with_requirements(tmp_path: Path) -> None:
    """sagemaker_submit_directory as a tarball (what the SDK uploads, here a local file): unpacked
    into code/, its requirements.txt installed (an already-satisfied one: no network), then run."""
    import tarfile

    source = tmp_path / "src"
    source.mkdir()
    (source / "entry.py").write_text("import helper\nprint(helper.VALUE)\n")
    (source / "helper.py").write_text("VALUE = 'from the tarball'\n")
    (source / "requirements.txt").write_text("psutil\n")
    tarball = tmp_path / "sourcedir.tar.gz"
    with tarfile.open(tarball, "w:gz") as archive:
        for path in source.iterdir():
            archive.add(path, arcname=path.name)
    tree = make_tree(tmp_path / "ml", program="entry.py",
                     hyperparameters={"sagemaker_submit_directory": f'"{tarball}"'})
    done = run_train(tree, timeout=180)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    assert done.stdout.decode().strip().endswith("from the tarball")
    assert (tree.code_dir / "helper.py").exists()
    assert b"installing " in done.stderr and b"requirements.txt" in done.stderr


def test_unreadable_tarball_is_a_code_setup_failure(tmp_path: Path) -> None:
    bad = tmp_path / "sourcedir.tar.gz"
    bad.write_bytes(b"not a tarball at all")
    tree = make_tree(tmp_path / "ml", hyperparameters={"sagemaker_submit_directory": f'"{bad}"'})
    done = run_train(tree)
    assert done.returncode == 65
    assert tree.failure.read_text().startswith("CodeSetupFailed: cannot unpack sagemaker_submit_directory")


def test_tarball_member_escaping_the_code_folder_is_refused(tmp_path: Path) -> None:
    import io
    import tarfile

    tarball = tmp_path / "evil.tar.gz"
    with tarfile.open(tarball, "w:gz") as archive:
        info = tarfile.TarInfo("../../escaped.txt")
        info.size = 3
        archive.addfile(info, io.BytesIO(b"bad"))
    tree = make_tree(tmp_path / "ml", hyperparameters={"sagemaker_submit_directory": f'"{tarball}"'})
    done = run_train(tree)
    assert done.returncode == 65
    assert not (tmp_path / "escaped.txt").exists() and not (tmp_path / "ml" / "escaped.txt").exists()
