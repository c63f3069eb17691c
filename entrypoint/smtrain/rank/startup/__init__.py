"""Code that runs at the start of every rank's Python program (see sitecustomize.py here)."""
