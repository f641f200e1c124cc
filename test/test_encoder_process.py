"""The encoder process's side of the frame protocol, over a real socket pair: the slots
it has encoded go back to the writer several in one message, and never later than when
the process is about to wait for the writer, so a writer waiting for a slot is not left
waiting for one that is free."""

from __future__ import annotations

import socket
import threading

import pytest

from ortf_ros.io.encoder_process import CLOSE, FREE, _freed_slots, _FreedSlots, _messages


def _next_reply(writer: socket.socket) -> tuple[int, ...]:
    reply = writer.recv(4096)
    assert reply[:1] == FREE
    return _freed_slots(reply[1:])


def test_freed_slots_go_back_together_and_before_the_process_waits() -> None:
    writer, process = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    with writer, process:
        writer.settimeout(10)
        freed = _FreedSlots(process)
        freed.batch = 3
        freed.add(5)
        freed.add(6)
        writer.setblocking(False)
        with pytest.raises(BlockingIOError):  # two of three: nothing sent yet
            writer.recv(4096)
        writer.settimeout(10)
        freed.add(7)
        assert _next_reply(writer) == (5, 6, 7)

        freed.add(8)
        messages = _messages(process, freed)
        writer.send(CLOSE)
        assert next(messages)[0] == CLOSE  # a message was waiting: read without sending slot 8
        writer.setblocking(False)
        with pytest.raises(BlockingIOError):
            writer.recv(4096)
        writer.settimeout(10)

        rest: list[tuple[bytes, list[int]]] = []
        reader = threading.Thread(target=lambda: rest.extend(messages))
        reader.start()  # nothing waits now: slot 8 goes before the process waits
        assert _next_reply(writer) == (8,)
        writer.shutdown(socket.SHUT_WR)  # the writer's end closes: the messages end
        reader.join(timeout=10)
        assert not reader.is_alive() and rest == []
