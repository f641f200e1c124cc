"""The live recorder's jobs, which ``pipeline.recorder.LiveRecorder`` coordinates on its
pipeline thread:

- ``warmup``: messages into the prologue until the dataset can be opened, then the
  dataset, its session and its encoder processes;
- ``commands``: episodes begun, ended, discarded and labelled as other threads ask;
- ``health``: the status snapshot other threads read (rates, drops, silent streams, latency);
- ``state``: what those share (the recorder's state, the open dataset and episode, labels).
"""
