"""The ``ortf-bag2ortf`` mapping that turns a recording of the player back into the dataset.

The default topic names are the ones bag2ortf detects by itself; this mapping also
fixes what detection would have to guess: camera names and kinds (the observation
keys), the step clock (the action's control rate, on whose grid the player puts the
steps, or each frame of the first camera when the dataset has no rate), the sync
tolerance (the dataset's, and each stream's own where tighter), base and
end-effector frames, gripper joints, and the task and episode topics. Every per-step
stream is published exactly at its step's time, so any sampling policy picks the
message of that step.
"""

from __future__ import annotations

from ortf_ros.format.manifest import Manifest
from ortf_ros.pipeline.mapping import (
    ActionMapping,
    AudioMapping,
    CameraMapping,
    EpisodeLabels,
    EpisodeSplit,
    JointStateMapping,
    LaserScanMapping,
    PointCloudMapping,
    StepClock,
    TopicMapping,
    WrenchMapping,
)
from ortf_ros.playback.publication import Publication
from ortf_ros.playback.settings import MessageSettings


def replay_mapping(manifest: Manifest, settings: MessageSettings, *, split_episodes: bool = True) -> TopicMapping:
    """The mapping for a recording of what ``settings`` publish of a dataset with ``manifest``.

    ``split_episodes`` splits at the episode topic (one episode per played episode);
    without it (or without that topic) each recording is one episode.
    """
    pub = Publication.of(manifest, settings)
    streams = settings.streams
    # Each stream's own tolerance where it is not the dataset's (which the others take).
    tolerances = manifest.alignment.tolerance_ms if manifest.alignment is not None else {}
    own = {name: ms for name, ms in tolerances.items() if ms != manifest.sync_tolerance_ms}
    cameras = tuple(
        CameraMapping(
            name=c.key,
            topic=c.topic,
            kind="depth" if c.kind == "depth" else "rgb",
            camera_info_topic=c.info_topic if "camera_info" in streams else None,
            sync_tolerance_ms=own.get(c.key),
        )
        for c in pub.cameras
        if c.kind in streams
    )
    rate = manifest.action_space.control_frequency_hz
    step = StepClock(rate_hz=rate) if rate or not cameras else StepClock(rate_hz=None, camera=cameras[0].name)
    action = ActionMapping()
    if pub.action is not None and "action" in streams:
        headerless = pub.action.form == "array"
        action = ActionMapping(
            topic=pub.action.topic, time="receive" if headerless else "header", sync_tolerance_ms=own.get("action")
        )
    listed = (manifest.robot.gripper or {}).get("joints")
    gripper = pub.gripper_joints if isinstance(listed, list) and list(pub.gripper_joints) == listed else ()
    episode_topic = settings.topic("episode")
    split = split_episodes and "episode" in streams
    return TopicMapping(
        cameras=cameras,
        joint_states=JointStateMapping(
            settings.topic("joint_states"), policy="nearest", sync_tolerance_ms=own.get("joint_states")
        )
        if "joint_states" in streams
        else None,
        wrenches=tuple(
            WrenchMapping(w.name, w.topic, sync_tolerance_ms=own.get(w.name))
            for w in pub.wrenches
            if "wrench" in streams
        ),
        audio=tuple(AudioMapping(a.name, a.topic) for a in pub.audio if "audio" in streams),
        action=action,
        tf_topics=(settings.topic("tf"),),
        tf_static_topics=(settings.topic("tf_static"),),
        robot_description_topic=settings.topic("robot_description"),
        base_frame=pub.ee_frames[0] if pub.ee_frames else None,
        end_effector_frame=pub.ee_frames[1] if pub.ee_frames else None,
        gripper_joints=gripper,  # only joints the robot declares (bag2ortf checks them in the URDF)
        step=step,
        sync_tolerance_ms=manifest.sync_tolerance_ms,
        episodes=EpisodeSplit(mode="topic", topic=episode_topic) if split else EpisodeSplit(),
        labels=EpisodeLabels(task_topic=settings.topic("task") if "task" in streams else None),
        laser_scans=tuple(
            LaserScanMapping(s.name, s.topic, sync_tolerance_ms=own.get(s.name))
            for s in pub.scans
            if "laser_scan" in streams
        ),
        point_clouds=tuple(PointCloudMapping(c.name, c.topic) for c in pub.clouds if "point_cloud" in streams),
    )
