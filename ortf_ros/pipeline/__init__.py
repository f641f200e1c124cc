"""The message pipeline shared by offline conversion and live recording:

    source -> decode -> extract -> assemble -> DatasetWriter

A source yields ``RawMessage`` (serialized bytes, as a bag stores them or an rclpy raw
subscription delivers them); ``decode`` turns bytes into messages with one typestore
for both; ``extract`` turns messages into the typed samples of ``samples``; the
assembler aligns samples to steps. Nothing here imports rclpy.
"""
