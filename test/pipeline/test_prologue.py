"""The prologue reads no more of a recording than it needs (review improvement 1)."""

from __future__ import annotations

from collections.abc import Collection, Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from ortf_ros.pipeline.decode import Decoder
from ortf_ros.pipeline.fastpath import SampleDecoder
from ortf_ros.pipeline.mapping import detect_mapping
from ortf_ros.pipeline.offline import read_prologue
from ortf_ros.pipeline.prologue import PrologueBuilder, prologue_topics
from ortf_ros.pipeline.samples import RawMessage
from ortf_ros.pipeline.sources.bag import BagSource
from ortf_ros.synthetic.bag import write_teleop_bag


class CountingSource(BagSource):
    read = 0

    def messages(self, topics: Collection[str] | None = None) -> Iterator[RawMessage]:
        for raw in super().messages(topics):
            self.read += 1
            yield raw


@pytest.mark.parametrize("description", ["/robot_description", "/not_recorded/robot_description"])
def test_a_missing_urdf_topic_is_not_waited_for(tmp_path: Path, description: str) -> None:
    bag = write_teleop_bag(tmp_path / "bag", "mcap", duration_s=4.0)
    source = CountingSource([bag.path])
    with source:
        mapping = replace(detect_mapping(source.topics()), robot_description_topic=description)
        prologue = read_prologue(source, SampleDecoder(Decoder()), mapping)
        wanted = sum(t.count for t in source.topics() if t.topic in prologue_topics(mapping))
        assert prologue.joint_state is not None and len(prologue.images) == len(mapping.cameras)
        # about 1 s of input (the TF window), not the whole 4 s recording with every frame
        assert source.read < wanted / 3, (source.read, wanted)
        assert (prologue.urdf is None) == (description != "/robot_description")


def test_a_urdf_given_is_not_waited_for_and_missing_names_what_is_lacking(tmp_path: Path) -> None:
    bag = write_teleop_bag(tmp_path / "bag", "mcap", duration_s=1.0)
    with BagSource([bag.path]) as source:
        mapping = detect_mapping(source.topics())
        present = {t.topic for t in source.topics()}
        builder = PrologueBuilder(mapping, SampleDecoder(Decoder()), present, urdf_given=True)
        assert "no frame yet on /wrist_camera/image_raw" in builder.missing()
        assert not any("URDF" in line for line in builder.missing())
        waiting = PrologueBuilder(mapping, SampleDecoder(Decoder()), present)
        assert "no URDF yet on /robot_description" in waiting.missing()
        absent = PrologueBuilder(mapping, SampleDecoder(Decoder()), present - {"/wrist_camera/image_raw"})
        assert "no frame yet on /wrist_camera/image_raw" not in absent.missing()
