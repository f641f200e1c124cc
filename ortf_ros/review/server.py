"""Serve the review app with uvicorn on a socket bound here, so that the URL printed
names the real port (``--port 0``: one the system picks) and is printed only once the
socket accepts connections."""

from __future__ import annotations

import socket
from collections.abc import Callable
from pathlib import Path

import uvicorn

from ortf_ros.errors import UsageError
from ortf_ros.review.app import create_app


def bind(host: str, port: int) -> socket.socket:
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise UsageError(f"--host {host}: not an address of this machine ({exc.strerror})") from None
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
    except OSError as exc:
        sock.close()
        raise UsageError(f"--host {host} --port {port}: cannot listen there ({exc.strerror or exc})") from None
    sock.listen(128)
    return sock


def url_of(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}/"


def serve(root: Path, host: str, port: int, announce: Callable[[str], None]) -> None:
    """Serve until Ctrl-C (or SIGTERM), which uvicorn re-raises once it has shut down."""
    app = create_app(root, host)
    sock = bind(host, port)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on"))
    announce(url_of(sock))
    try:
        server.run(sockets=[sock])
    finally:
        sock.close()
