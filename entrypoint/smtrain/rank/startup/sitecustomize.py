"""Loaded by Python at start-up in every rank's program (and a single host's program): `train` puts
this folder first on the program's PYTHONPATH. It
- tells the stall watchdog (smtrain.progress) when the rank calls Horovod's `init` and when it returns
  from it, so that a rank that never gets to `hvd.init()` while the others wait in it is named;
- when `train` asks for step profiling (SM_FRAMEWORK_PROFILER), starts the rank's step recorder when
  the program first imports a framework (or smtrain.progress), and patches Keras, tf.function,
  GradientTape and Horovod's allreduce as each is imported (smtrain.profiler.hooks).
It imports nothing of the frameworks, nor of smtrain, at start-up (it costs a program under a
millisecond), and then loads the sitecustomize this one shadows, if there is one."""
from __future__ import annotations

import importlib
import os
import sys

_HOROVOD_BASICS = "horovod.common.basics"
# The modules smtrain.profiler.hooks patches (its PATCHES; tests/unit/test_step_profiler.py checks the
# two agree), and the helper's hook (smtrain.progress imports it): the first of them to be imported
# starts the step recorder. A program that imports none of them loads nothing of smtrain's.
PROFILED_MODULES = ("keras.src.callbacks.callback_list", "tf_keras.src.callbacks",
                    "tensorflow.python.eager.polymorphic_function.polymorphic_function",
                    "tensorflow.python.eager.backprop", "horovod.tensorflow")
_STEP_HOOK = "smtrain.common.stephook"
# The settings' names this hook reads: smtrain.config.settings' SKIP_TEARDOWN and CURRENT_HOST (a test checks they agree)
SKIP_TEARDOWN_ENV = "SM_SKIP_TEARDOWN_ON_FAILURE"
CURRENT_HOST_ENV = "SM_CURRENT_HOST"
UNCAUGHT_OFFSET = 56  # smtrain.wire.progress_file's, in the file SM_PROGRESS_FILE names (checked likewise)


def _count_init(module):
    basics_class = getattr(module, "HorovodBasics", None)
    if basics_class is None:
        return
    original = basics_class.init

    def init(self, *args, **kwargs):
        from smtrain import progress

        progress.framework_init(progress.InitPhase.WAITING)  # this rank reached its framework's init
        result = original(self, *args, **kwargs)
        progress.framework_init(progress.InitPhase.DONE)  # ... and every rank did
        return result

    init.__wrapped__ = original
    basics_class.init = init


class _ImportProbe:
    """A meta path finder that runs `after[name](module)` once a watched module has executed, and
    leaves once all have. (Neither importlib.abc nor importlib.util: they cost the start-up 15 ms.)"""

    def __init__(self, after):
        self.after = after

    def find_spec(self, name, path, target=None):
        if name not in self.after:
            return None
        spec = None
        for finder in sys.meta_path:  # the normal way, less this finder
            find = getattr(finder, "find_spec", None) if finder is not self else None
            spec = find(name, path, target) if find is not None else None
            if spec is not None:
                break
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        patch = self.after.pop(name)
        if not self.after and self in sys.meta_path:
            sys.meta_path.remove(self)
        run_module = spec.loader.exec_module

        def exec_module(module):
            run_module(module)
            try:
                patch(module)
            except Exception as e:  # a framework version whose shape we do not know: measure less, never fail
                sys.stderr.write(f"[smtrain] cannot hook {name}: {type(e).__name__}: {e}\n")

        spec.loader.exec_module = exec_module
        return spec


class _StepProfiler:
    """Started when the first profiled module is imported: the recorder, its exit hook, the helper's
    listener; then each module's patch (smtrain.profiler.hooks) as it is imported."""

    def __init__(self):
        self.state = None  # smtrain.profiler.hooks.State, once started
        self.helper_step = None  # what smtrain.progress.step() calls
        self.tried = False  # started once (or failed to), at the first watched import

    def watched(self):
        """What the probe watches for the step profiler, when `train` asked for it (else nothing)."""
        if not os.environ.get("SM_FRAMEWORK_PROFILER"):
            return {}
        return {name: (lambda module, name=name: self.patch(name, module)) for name in (*PROFILED_MODULES, _STEP_HOOK)}

    def patch(self, name, module):
        if not self.tried:
            self.tried = True  # before starting: a watched module imported meanwhile does not start it again
            self.start()
        if self.state is None:
            return
        if name == _STEP_HOOK:
            module.listener = self.helper_step
            return
        from smtrain.profiler import hooks

        hooks.PATCHES[name](module, self.state)

    def start(self):
        try:
            from smtrain.wire.profiler_settings import ProfilerSettings

            settings = ProfilerSettings.from_environ(os.environ)
            if settings is None or not (settings.steps or settings.detailed or settings.python):
                return
            # mpirun gives every rank the master's settings: the host is the rank's own (the rank launcher's)
            settings = settings._replace(host=os.environ.get(CURRENT_HOST_ENV) or settings.host)
            from smtrain.profiler import hooks
            from smtrain.profiler.steps import StepRecorder

            rank = os.environ.get("SM_RANK") or "0"  # the rank launcher sets it (from Open MPI's, under mpirun)
            recorder = StepRecorder(settings, int(rank) if rank.isdigit() else 0)
            recorder.register_exit()
            self.state = hooks.State(recorder)
            self.helper_step = hooks.helper_step(self.state)
        except Exception as e:  # never fail the program for its profiling
            sys.stderr.write(f"[smtrain] step profiling is off: {type(e).__name__}: {e}\n")


def _skip_teardown_on_failure():
    """After an uncaught exception in the main thread the exit status is 1 whatever follows: the
    interpreter joins the non-daemon threads, runs the atexit handlers - this one last, as it is
    registered first - and then tears down its modules, which is what this skips (stdio flushed).
    Only a call of the hook by the interpreter itself (no Python caller: not a REPL's or a
    program's own call) counts; KeyboardInterrupt keeps its signal status; a program that set
    an excepthook of its own keeps its teardown."""
    import atexit

    previous = sys.excepthook
    uncaught = []

    def excepthook(kind, value, traceback):
        if sys._getframe().f_back is None and not issubclass(kind, KeyboardInterrupt):
            uncaught.append(kind)
            _say_uncaught()
        previous(kind, value, traceback)

    def exit_now():
        if not uncaught:
            return
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass
        os._exit(1)

    sys.excepthook = excepthook
    atexit.register(exit_now)


def _say_uncaught():
    """Tell the rank's launcher, before the traceback it watches for is printed, that this one ends
    the program: its report of the failure is then as good as the final one (the progress file)."""
    path = os.environ.get("SM_PROGRESS_FILE")
    if not path:
        return
    try:
        fd = os.open(path, os.O_WRONLY)
        try:
            os.pwrite(fd, (1).to_bytes(8, "little"), UNCAUGHT_OFFSET)
        finally:
            os.close(fd)
    except OSError:
        pass


def _load_the_shadowed_sitecustomize():
    here = os.path.dirname(os.path.abspath(__file__))
    ours = sys.modules.pop("sitecustomize", None)
    saved = sys.path[:]
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]
    try:
        importlib.import_module("sitecustomize")
    except ImportError:
        if ours is not None:
            sys.modules["sitecustomize"] = ours
    finally:
        sys.path[:] = saved


def _install():
    watched = {_HOROVOD_BASICS: _count_init, **_StepProfiler().watched()}
    sys.meta_path.insert(0, _ImportProbe(watched))
    if os.environ.get(SKIP_TEARDOWN_ENV) == "1":
        _skip_teardown_on_failure()


_install()
_load_the_shadowed_sitecustomize()
