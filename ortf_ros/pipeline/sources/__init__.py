"""Where raw messages come from: a recording on disk (``bag.BagSource``: seekable, read
ahead for the prologue, a chunk's messages as runs) or live subscriptions
(``live.LiveSource``: bounded queues with counted drops, and how far input time has come).

The two are not behind one protocol on purpose: nothing reads both alike. The bag
driver (``pipeline.offline``) and the live driver (``pipeline.recorder``) each read their
source as it is, and share everything after it: ``PrologueBuilder``, ``describe``,
``EpisodeSession``.
"""
