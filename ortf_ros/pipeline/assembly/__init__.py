"""Samples -> steps: the stage shared by bag conversion and live recording.

Samples arrive in receive-time order, one by one or (high-rate streams) as blocks of
consecutive samples of a topic. Every camera frame, joint state and wrench is written
(frames to the episode's video as they arrive, fast streams to their native-rate tables
in batches before each step), so nothing recorded is thrown away and memory holds only
recent samples.
Steps are laid on a control-rate grid (or on a driving camera's frames). When the
caller asks (``emit_ready``), every step is emitted for which no stream can deliver a
sample closer to its time any more; each records for each stream the sample it used and
how far that sample was from the step time (the alignment columns).

Times are nanoseconds on each stream's chosen clock (header stamp or receive time).

One module per job, ``assembler.Assembler`` coordinating them:

- ``routes``: each sample to its stream by kind (cameras, H.264 packets, wrenches, the
  action, scans and clouds, audio, detections); ``joints`` merges joint states;
- ``native``: native-rate samples batched on their way to the writer, and the episode's
  clock origin (the writer's time 0);
- ``step_clock``: when a step is due (the watermark: how far input time has come);
- ``steps``: a due step made from each stream's sample and written;
- ``counts``: what became data per topic, and what did not and why.
"""
