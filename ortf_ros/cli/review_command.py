"""``ortf review DATASET [--host 127.0.0.1] [--port 0]``: a local web page to go through
the episodes and decide (``ortf_ros.review``, an optional extra imported only here)."""

from __future__ import annotations

import argparse

from ortf_ros.cli.boundary import EXIT_OK, OneLineParser
from ortf_ros.cli.conversions import DATASET
from ortf_ros.extras import optional_module
from ortf_ros.io import paths

EXTRA = "pip install 'ortf_ros[review]'"


def _port(word: str) -> int:
    try:
        port = int(word)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a port number 0..65535, got {word!r}") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"expected a port number 0..65535, got {port}")
    return port


def _cmd_review(args: argparse.Namespace) -> int:
    root = paths.input_dir(args.dataset, DATASET)
    for module in ("starlette", "uvicorn", "plotly"):
        optional_module(module, "ortf review needs Starlette, uvicorn and plotly", "review")
    from ortf_ros.dataset.reader import load_dataset
    from ortf_ros.review.server import serve

    load_dataset(root)  # a directory that is no dataset is refused here, not on the first page

    def announce(url: str) -> None:
        print(f"ortf review: {root} at {url} (Ctrl-C stops)", flush=True)

    serve(root, args.host, args.port, announce)
    return EXIT_OK


def add_review(sub: argparse._SubParsersAction[OneLineParser]) -> None:
    p = sub.add_parser(
        "review",
        help=f"review the episodes in a local web page: play, plot, label, delete (needs {EXTRA})",
        description="Serve a web page to go through a dataset's episodes: cameras in sync, plots, doctor "
        "findings, and decisions (outcome, notes, review flag, delete) written back into the dataset.",
    )
    p.add_argument("dataset", metavar="DATASET")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1: this machine only)")
    p.add_argument("--port", type=_port, default=0, help="port to listen on (default 0: a free one, printed)")
    p.set_defaults(run=_cmd_review)
