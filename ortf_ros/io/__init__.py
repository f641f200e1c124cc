"""File-level I/O: atomic replacement, Parquet and video encode/decode."""
