"""Step events written fast, as the step profiler's writer writes them, on a simulated clock."""
from __future__ import annotations

from smtrain.profiler.steps import StepRecorder


def fast_steps(recorder: StepRecorder, steps: int, step_s: float = 0.001, gap_s: float = 0.0001,
                start: float = 1000.0, slow_every: int = 0) -> float:
    """`steps` training steps of `step_s` (every `slow_every`-th 20 times longer), written as the writer
    would (a flush a simulated second, a new file a simulated minute); returns the end."""
    now = [start]
    recorder.clock = lambda: now[0]
    per_flush = max(1, int(1.0 / (step_s + gap_s)))
    for i in range(steps):
        now[0] += gap_s
        length = step_s * (20 if slow_every and i % slow_every == slow_every - 1 else 1)
        recorder.add_step("TRAIN", now[0], now[0] + length)
        now[0] += length
        if i % per_flush == 0:
            recorder.flush()
    return now[0]
