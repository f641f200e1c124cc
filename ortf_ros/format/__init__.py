"""The ORTF v0.2 format itself: paths, metadata types and Arrow schemas (no I/O)."""
