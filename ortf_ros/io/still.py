"""One compressed picture decoded on its own: a JPEG or PNG message, an H.264 keyframe."""

from __future__ import annotations

import av


def decode_alone(codec: str, data: bytes, name: str) -> av.VideoFrame:
    """The first frame ``data`` (one packet of ``codec``, called ``name`` in messages)
    decodes to; ValueError saying why when it does not decode. Errors are not concealed:
    FFmpeg would otherwise return a half-grey frame for a truncated JPEG."""
    context = av.CodecContext.create(codec, "r")
    assert isinstance(context, av.VideoCodecContext)
    context.options = {"err_detect": "explode"}
    try:
        frames = context.decode(av.Packet(data))
        frames += context.decode(None)
    except av.FFmpegError as exc:
        raise ValueError(f"{len(data)} bytes do not decode as {name}: {exc.strerror or exc}") from None
    if not frames:
        raise ValueError(f"{len(data)} bytes do not decode as {name}: no frame")
    frame = frames[0]
    assert isinstance(frame, av.VideoFrame)
    return frame
