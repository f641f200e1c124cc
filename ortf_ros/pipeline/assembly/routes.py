"""Each sample to its stream, by kind: a camera frame to its video and sampler, an H.264
packet muxed as it is, a wrench or the action into its sampler, scans and clouds
(``range_input``), audio (``audio``), a controller's state in both its roles, the first
detections (``detections``), TF into the buffer; joint states go to ``joints``. What
a route does not take it counts, with why (``TopicCounts``), and says so (False)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ortf_ros.dataset.writer import DatasetWriter
from ortf_ros.errors import AudioError, SourceError
from ortf_ros.format.manifest import Manifest
from ortf_ros.format.units import NS
from ortf_ros.io.still import decode_alone
from ortf_ros.pipeline.assembly.counts import TopicCounts
from ortf_ros.pipeline.assembly.joints import JointRoute
from ortf_ros.pipeline.assembly.native import NativeBatching
from ortf_ros.pipeline.assembly.steps import StepLayout
from ortf_ros.pipeline.mapping import TopicMapping
from ortf_ros.pipeline.samples import (
    AudioChunkSample,
    AudioInfoSample,
    ControllerStateSample,
    DetectionsSample,
    EncodedFrameSample,
    ImageSample,
    JointStateSample,
    LaserScanSample,
    PointCloudSample,
    Sample,
    SampleBlock,
    TransformSample,
    VectorSample,
    WrenchSample,
    stream_time,
)
from ortf_ros.pipeline.streams.audio import AudioRouter
from ortf_ros.pipeline.streams.detections import FirstFrameDetections
from ortf_ros.pipeline.streams.h264_camera import EncodedCameraGate, ParameterSets
from ortf_ros.pipeline.sync import StreamSampler, lerp_array
from ortf_ros.pipeline.tf import TfBuffer


class Routes:
    """One episode's streams (``samplers``), and the route of each kind of sample into them."""

    def __init__(
        self,
        config: TopicMapping,
        manifest: Manifest,
        layout: StepLayout,
        writer: DatasetWriter,
        counts: TopicCounts,
        *,
        tf: TfBuffer,
        native: NativeBatching,
        parameter_sets: dict[str, ParameterSets],
    ) -> None:
        self.config = config
        self.manifest = manifest
        self.layout = layout
        self.writer = writer
        self.counts = counts
        self.tf = tf
        self.native = native
        self.ranges = native.ranges
        self.joints = JointRoute(config, layout, counts, native)
        self.wrenches: dict[str, StreamSampler[np.ndarray]] = {
            w.name: StreamSampler(w.name, w.policy, interpolate=lerp_array) for w in config.wrenches
        }
        self.cameras: dict[str, StreamSampler[int]] = {c.name: StreamSampler(c.name, c.policy) for c in config.cameras}
        self.action: StreamSampler[np.ndarray] = StreamSampler("action", config.action.policy, interpolate=lerp_array)
        self.audio = AudioRouter(config, manifest, writer, native.clock_ns, stream_time)
        detections = config.detections
        self.detections = (
            None if detections is None else FirstFrameDetections(detections, manifest.cameras[detections.camera])
        )
        self._camera_by_topic = {c.topic: c for c in config.cameras}
        resolutions = {name: sensor.resolution for name, sensor in manifest.cameras.items()}
        self._encoded = EncodedCameraGate(resolutions, parameter_sets)
        self._wrench_by_topic = {w.topic: w for w in config.wrenches}

    def samplers(self) -> list[tuple[str, StreamSampler[Any]]]:
        """Every stream a step samples, by name, in the order the steps ask them."""
        named: list[tuple[str, StreamSampler[Any]]] = [("joint_states", self.joints.sampler)]
        named += self.wrenches.items()
        named += self.ranges.scans.items()
        named += self.cameras.items()
        if self.config.action.topic is not None:
            named.append(("action", self.action))
        return named

    def lost(self, topic: str) -> None:
        """A message of ``topic`` that did not decode: an H.264 camera's next packets refer to it."""
        if topic in self._camera_by_topic:
            self._encoded.lost(self._camera_by_topic[topic].name)

    def route_block(self, block: SampleBlock, topic: str) -> bool:
        """A block of the joint state or a wrench topic taken whole; False (nothing taken) for
        any other, which the caller then routes sample by sample."""
        if block.kind == "wrench":
            return topic in self._wrench_by_topic and self._wrench_block(block, topic)
        return topic == self.joints.topic and self.joints.take_block(block)

    def route(self, sample: Sample, topic: str) -> bool:
        """Whether the sample was used."""
        if isinstance(sample, WrenchSample):  # (the most frequent first; the types exclude each other)
            return topic in self._wrench_by_topic and self._wrench(sample, topic)
        if isinstance(sample, (AudioChunkSample, AudioInfoSample)):
            try:
                return self.audio.route(sample, topic)
            except AudioError as exc:  # (a chunk the microphone's file cannot take)
                self.counts.undecodable[topic] += 1
                self.counts.reasons.setdefault(topic, f"{topic}: {exc}")
                return False
        if isinstance(sample, TransformSample):
            return self.tf.add(sample)
        if isinstance(sample, ImageSample):
            return self._image(sample, topic)
        if isinstance(sample, LaserScanSample):
            return self._laser_scan(sample, topic)
        if isinstance(sample, PointCloudSample):
            return self._point_cloud(sample, topic)
        if isinstance(sample, EncodedFrameSample):
            return self._encoded_frame(sample, topic)
        if isinstance(sample, JointStateSample) and topic == self.joints.topic:
            return self.joints.take(sample)
        if isinstance(sample, ControllerStateSample):
            return self._controller_state(sample, topic)
        if topic == self.config.action.topic and isinstance(sample, (JointStateSample, VectorSample)):
            return self._action(sample)
        if isinstance(sample, DetectionsSample) and self.detections is not None:
            return self.detections.offer(topic, stream_time(sample.stamps, self.detections.mapping.time), sample)
        return False  # latched state (camera info, URDF) went into the manifest

    def _laser_scan(self, sample: LaserScanSample, topic: str) -> bool:
        """A scan into its sampler (steps point at it) and its native-rate table (``range_input``)."""
        rows = self.ranges.scan_rows(sample, topic)
        if rows is None:
            return False
        time_ns, row = rows
        self.native.hold(self.ranges.scan_names[topic], time_ns, row, sample.stamps)
        return True

    def _point_cloud(self, sample: PointCloudSample, topic: str) -> bool:
        """A cloud to the writer (held until the episode's clock has started: ``NativeBatching``)."""
        cloud = self.ranges.cloud(sample, topic)
        if cloud is None:
            return False
        self.native.write_cloud(cloud)
        return True

    def _controller_state(self, sample: ControllerStateSample, topic: str) -> bool:
        """The joint state a controller's feedback is (its topic the joint state's), and the
        action its reference is (its topic the action's): one message may be both, and is
        counted once: used if either role took it, else not used for the first reason found."""
        counters = (self.counts.undecodable, self.counts.out_of_order, self.counts.not_for_action)
        before = [counter[topic] for counter in counters]
        used = topic == self.joints.topic and self.joints.take(sample.state)
        if topic == self.config.action.topic and sample.reference is not None:
            used = self._action(sample.reference) or used
        counted = False
        for counter, then in zip(counters, before, strict=True):
            if counter[topic] > then:
                counter[topic] = then if used or counted else then + 1
                counted = True
        return used

    def _image(self, sample: ImageSample, topic: str) -> bool:
        camera = self._camera_by_topic.get(topic)
        if camera is None:
            return False
        time_ns = stream_time(sample.stamps, camera.time)
        resolution = self.manifest.cameras[camera.name].resolution
        height, width = sample.pixels.shape[:2]
        if resolution is not None and (width, height) != (resolution.width, resolution.height):
            raise SourceError(
                f"{topic} at {sample.stamps.receive_ns / NS:.6f} s: the camera's resolution changed from "
                f"{resolution.width}x{resolution.height} to {width}x{height} mid-recording"
            )
        sampler = self.cameras[camera.name]
        if not self._in_order(sampler, time_ns, topic):
            return False
        index = self.writer.add_frame(camera.name, sample.pixels)
        sampler.add(time_ns, index)
        if index == 0 and self.detections is not None and camera.name == self.detections.mapping.camera:
            self.detections.first_frame(time_ns, sample.pixels)
        return True

    def _in_order(self, sampler: StreamSampler[int], time_ns: int, topic: str) -> bool:
        """Whether a camera frame comes after the camera's newest (else it is counted out of order)."""
        if sampler.newest_ns is not None and time_ns < sampler.newest_ns:
            self.counts.out_of_order[topic] += 1
            return False
        return True

    def _encoded_frame(self, sample: EncodedFrameSample, topic: str) -> bool:
        """A published H.264 packet, muxed into the camera's video as it is (``h264_camera``)."""
        camera = self._camera_by_topic.get(topic)
        if camera is None:
            return False
        time_ns = stream_time(sample.stamps, camera.time)
        sampler = self.cameras[camera.name]
        if not self._in_order(sampler, time_ns, topic):
            self._encoded.lost(camera.name)
            return False
        admitted = self._encoded.admit(camera.name, sample)
        if not isinstance(admitted, bytes):
            counters = {
                "before_first_keyframe": self.counts.before_first_keyframe,
                "after_lost_packet": self.counts.after_lost_packet,
                "no_picture": self.counts.no_picture,
            }
            counters[admitted][topic] += 1
            return False
        index = self.writer.add_packet(camera.name, admitted, sample.facts.idr)  # (every IDR frame a sync sample)
        sampler.add(time_ns, index)
        if index == 0 and self.detections is not None and camera.name == self.detections.mapping.camera:
            # (an episode's first packet is a keyframe: it decodes alone, once an episode)
            pixels = decode_alone("h264", admitted, "an H.264 keyframe").to_ndarray(format="rgb24")
            self.detections.first_frame(time_ns, pixels)
        return True

    def _wrench_block(self, block: SampleBlock, topic: str) -> bool:
        mapping = self._wrench_by_topic[topic]
        times = block.times(mapping.time)
        sampler = self.wrenches[mapping.name]
        if not sampler.accepts(times):
            return False
        values = block.stacked(0)
        sampler.extend(times, values)
        if mapping.native:
            self.native.queue(mapping.name, times, values, block.header_ns.tolist(), block.receive_ns.tolist())
        return True

    def _wrench(self, sample: WrenchSample, topic: str) -> bool:
        mapping = self._wrench_by_topic[topic]
        time_ns = stream_time(sample.stamps, mapping.time)
        values = np.concatenate([sample.force, sample.torque])
        if not self.wrenches[mapping.name].add(time_ns, values):
            self.counts.out_of_order[topic] += 1
            return False
        if mapping.native:
            self.native.hold(mapping.name, time_ns, values, sample.stamps)
        return True

    def _action(self, sample: JointStateSample | VectorSample) -> bool:
        time_ns = stream_time(sample.stamps, self.config.action.time)
        if isinstance(sample, JointStateSample):
            unnamed = self.layout.unnamed_joints
            names = sample.names or (unnamed if len(sample.position) == len(unnamed) else ())
            if len(sample.position) != len(names):
                # no positions (a velocity command, say), or unnamed ones of another count
                self.counts.not_for_action[self.config.action.topic or "action"] += 1
                return False
            by_name = dict(zip(names, sample.position, strict=True))
        else:
            by_name = dict(zip(sample.names, sample.values, strict=True))
        values = np.array([by_name.get(name, np.nan) for name in self.layout.action_names])
        if np.isnan(values).any():
            self.counts.not_for_action[self.config.action.topic or "action"] += 1
            return False  # a command for other joints
        if not self.action.add(time_ns, values):
            self.counts.out_of_order[self.config.action.topic or "action"] += 1
            return False
        return True
