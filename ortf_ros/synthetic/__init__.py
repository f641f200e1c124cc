"""Synthetic inputs with analytically known content: what ``ortf demo`` shows, and what the
tests and benchmarks check the converter, the recorder and the dataset against.

Everything is a pure function of time or sequence number, public, so a test can compute
what a converter must produce. Two scenes:

- the teleop scene, a robot's recording as ROS messages: ``scene`` (``TeleopConfig``: which
  streams, their rates and types), ``topics``, ``robot`` (the URDF generator and the arm's
  joints), ``motion`` (joints, command, wrench), ``tf`` (frames, static and moving
  transforms), ``images`` (frames that carry their number, depth), ``lidar``, ``audio``,
  ``detections``, ``schedule`` (when each message is stamped and received), ``typestore``
  (the message definitions) and ``messages`` (each message built and serialized, with
  ``camera_messages``, ``sensor_messages`` and ``message_factory``); written by
  ``bag`` (with ``bag_sinks``), or published in real time by ``ortf_scene_publisher``
  (``ortf_ros.ros.scene_publisher``) through ``live`` and ``live_report``;
- the demo arm, a dataset's episodes without ROS messages: ``demo_arm`` (its manifest,
  URDF and values), written by ``dataset``.

Shipped in the package (not only in the repository) because ``ortf demo`` and
``ortf_scene_publisher`` run on it where ``pip install ortf_ros`` put them.
"""
