"""rosbag2's sqlite3 storage (``.db3``), read with rosbags; its per-topic times from one
SQL query instead of a pass over the messages."""

from __future__ import annotations

from collections.abc import Collection, Iterator

from ortf_ros.pipeline.sources.mcap_chunks import Batch
from ortf_ros.pipeline.sources.rosbags_file import RosbagsFile


class SqliteFile(RosbagsFile):
    format_name = "sqlite3"

    def _index_times(self) -> dict[int, tuple[int, int]]:
        import apsw

        db = apsw.Connection(f"file:{self.path}?immutable=1", flags=apsw.SQLITE_OPEN_READONLY | apsw.SQLITE_OPEN_URI)
        try:
            rows = db.execute("SELECT topic_id, MIN(timestamp), MAX(timestamp) FROM messages GROUP BY topic_id")
            return {int(cid): (int(first), int(last)) for cid, first, last in rows}
        finally:
            db.close()

    def batches(self, keys: Collection[int], runs: Collection[int]) -> Iterator[Batch] | None:
        return None  # (rows, not chunks: BagSource batches the messages)
