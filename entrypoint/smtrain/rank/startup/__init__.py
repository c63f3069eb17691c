"""The start-up hook put on every rank's PYTHONPATH (sitecustomize.py: where the rank is in hvd.init)."""

__all__: list[str] = []  # nothing to import: the interpreter loads sitecustomize itself
