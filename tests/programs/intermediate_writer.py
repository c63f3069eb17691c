"""Writes intermediate output as a job does while it runs: a file, then - once $GO_FILE exists - a file in a new
folder, a file renamed into the folder, and the first file again. Never imports smtrain."""
import os
import pathlib
import time

out = pathlib.Path(os.environ["SM_OUTPUT_INTERMEDIATE_DIR"])
(out / "first.txt").write_text("first")
go, deadline = pathlib.Path(os.environ["GO_FILE"]), time.monotonic() + 120
while not go.exists() and time.monotonic() < deadline:
    time.sleep(0.05)
(out / "sub").mkdir()
(out / "sub" / "second.txt").write_text("second")
aside = pathlib.Path(os.environ["SM_OUTPUT_DATA_DIR"]) / "third.partial"
aside.write_text("third")
os.replace(aside, out / "third.txt")
(out / "first.txt").write_text("first, rewritten")
print("written")
