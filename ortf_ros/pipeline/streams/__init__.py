"""The stream kinds beyond cameras and joints, each in the modules that carry it from a
message to the dataset:

- audio (``audio``: both ``audio_common_msgs`` layouts -> samples, the microphone's sensor,
  its router to the writer; ``audio_definitions``: the upstream ``.msg`` texts);
- range sensors (``range_sensors``: LaserScan and PointCloud2 -> samples;
  ``range_manifest``: how they are declared in the manifest; ``range_input``: the
  assembler's side of them);
- H.264 cameras (``h264_camera``: packets kept as published, from a keyframe on);
- detections (``detections``: a ``Detection2DArray`` topic as an episode's scene objects).

Nothing is imported here: ``pipeline.decode`` needs ``audio_definitions`` alone, and the
others bring the dataset writer with them.
"""
