"""Child process of test_audio's crash test: records one episode with a microphone and is
killed by SIGKILL mid-episode, after ``argv[2]`` audio chunks (of 1024 samples, a chunk
every 64 ms, a step every 1/30 s), into the dataset at ``argv[1]``."""

from __future__ import annotations

import os
import signal
import sys
from dataclasses import replace

import numpy as np

from ortf_ros.dataset.writer import DatasetWriter
from ortf_ros.format.audio import AudioFormat, audio_sensor
from ortf_ros.synthetic.demo_arm import demo_action, demo_manifest, demo_rgb, demo_state

CHUNK, RATE = 1024, 16000


def chunk(seq: int) -> np.ndarray:
    return (np.arange(seq * CHUNK, (seq + 1) * CHUNK) % 30000).astype(np.int16)


def main() -> None:
    root, chunks = sys.argv[1], int(sys.argv[2])
    base = demo_manifest(64, 48, depth=False)
    microphone = audio_sensor("mic", AudioFormat("s16le", 1, RATE), source="/mic/audio", layout="AudioStamped")
    manifest = replace(base, sensors=(*base.sensors, microphone))
    writer = DatasetWriter(root, manifest).open()
    writer.begin_episode("Listen")
    step = 0
    for seq in range(chunks):
        t = seq * CHUNK / RATE
        while step / 30 <= t:
            images = {cam: demo_rgb(n, step, 64, 48) for n, cam in enumerate(("cam_wrist", "cam_overhead"))}
            writer.add_step(step / 30, demo_state(0, step), demo_action(0, step), images)
            step += 1
        writer.add_audio("mic", chunk(seq), t, time_ns=round(t * 1e9), stamp_ns=round(t * 1e9), receive_ns=0)
    os.kill(os.getpid(), signal.SIGKILL)


if __name__ == "__main__":
    main()
