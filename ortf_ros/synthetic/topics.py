"""The teleop scene's topic names, and which camera topic is seen from which frame.

One place for the names every other module of the scene (the schedule, the messages,
the images' colours) and every test refers to a stream by.

Cameras publish raw ``sensor_msgs/Image`` on ``<camera>/image_raw``; a JPEG camera on
``<image topic>/compressed`` (``COMPRESSED_SUFFIX``, image_transport's name) and an H.264
one on ``<image topic>/h264`` (``H264_SUFFIX``); each has its ``camera_info``
(``CAMERA_INFO_TOPICS``).
"""

from __future__ import annotations

from ortf_ros.synthetic.tf import OVERHEAD_CAMERA_FRAME, SIDE_CAMERA_FRAME, WRIST_CAMERA_FRAME

TOPIC_ROBOT_DESCRIPTION = "/robot_description"
TOPIC_TF = "/tf"
TOPIC_TF_STATIC = "/tf_static"
TOPIC_JOINT_STATES = "/joint_states"
TOPIC_JOINT_COMMAND = "/joint_command"
TOPIC_WRIST_IMAGE = "/wrist_camera/image_raw"
TOPIC_OVERHEAD_IMAGE = "/overhead_camera/image_raw"
TOPIC_SIDE_IMAGE = "/side_camera/image_raw"  # only with TeleopConfig.side_camera
TOPIC_WRIST_CAMERA_INFO = "/wrist_camera/camera_info"
TOPIC_OVERHEAD_CAMERA_INFO = "/overhead_camera/camera_info"
TOPIC_SIDE_CAMERA_INFO = "/side_camera/camera_info"
TOPIC_DEPTH_CAMERA_INFO = "/depth_camera/camera_info"
TOPIC_DEPTH_IMAGE = "/depth_camera/image_raw"
TOPIC_WRENCH = "/ft_sensor/wrench"
TOPIC_CONTROLLER_STATE = "/arm_controller/state"  # only with TeleopConfig.controller_state
TOPIC_AUDIO = "/microphone/audio"  # only with TeleopConfig.audio
TOPIC_AUDIO_INFO = "/microphone/audio_info"  # only with TeleopConfig.audio "older"
TOPIC_SCAN = "/lidar/scan"  # only with TeleopConfig.lidar
TOPIC_POINTS = "/lidar/points"  # only with TeleopConfig.lidar
TOPIC_DETECTIONS = "/wrist_camera/detections"  # only with TeleopConfig.detections

COMPRESSED_SUFFIX = "/compressed"  # image_transport's name for the JPEG stream
H264_SUFFIX = "/h264"  # an H.264 camera's topic: <image topic>/h264
CAMERAS = {TOPIC_WRIST_IMAGE: WRIST_CAMERA_FRAME, TOPIC_OVERHEAD_IMAGE: OVERHEAD_CAMERA_FRAME}  # the default scene's
SIDE_CAMERAS = {TOPIC_SIDE_IMAGE: SIDE_CAMERA_FRAME}  # added by TeleopConfig.side_camera
CAMERA_FRAMES = CAMERAS | SIDE_CAMERAS  # every RGB camera image topic -> its optical frame
CAMERA_INFO_TOPICS = {
    TOPIC_WRIST_IMAGE: TOPIC_WRIST_CAMERA_INFO,
    TOPIC_OVERHEAD_IMAGE: TOPIC_OVERHEAD_CAMERA_INFO,
    TOPIC_SIDE_IMAGE: TOPIC_SIDE_CAMERA_INFO,
}
