"""Pipe-mode data on the toolkit's side: record framing (TFRecord, RecordIO, lines), the native reader,
opening FIFOs, fingerprints and the reader's journal, the checkpoint folder as it lies on disk, the
host's demultiplexer that deals one FIFO to several ranks, and the local feeder that plays SageMaker's part."""

# Submodules are imported where they are used, never here: a process loads only what its role needs.
__all__ = ["checkpoint_folder", "checkpoint_write", "dealer", "demux", "demux_restarts", "feeder", "fifo", "fingerprints", "frames",
           "journal", "libs", "native", "record_reader", "spliced", "spool"]
