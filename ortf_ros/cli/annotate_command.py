"""``ortf annotate DATASET --episode ID --objects FILE``: label the objects of an episode's
scene (``ortf_ros.dataset.annotate``): ``scene_objects.json`` and ``first_frame.jpg``."""

from __future__ import annotations

import argparse

from ortf_ros.cli.boundary import EXIT_OK, OneLineParser
from ortf_ros.cli.conversions import DATASET
from ortf_ros.dataset.annotate import annotate_episode, read_objects_file
from ortf_ros.errors import naming
from ortf_ros.io import paths


def add_annotate(sub: argparse._SubParsersAction[OneLineParser]) -> None:
    p = sub.add_parser(
        "annotate", help="label an episode's scene objects: scene_objects.json and first_frame.jpg with the boxes"
    )
    p.add_argument("dataset", metavar="DATASET")
    p.add_argument("--episode", required=True, metavar="ID", help="the episode's id (`ortf info DATASET` lists them)")
    p.add_argument(
        "--objects",
        required=True,
        metavar="FILE",
        help="JSON or YAML: a scene_objects.json-shaped object or a list of objects "
        "(label, class, bounding_box {x, y, width, height} in pixels, optional color '#rrggbb')",
    )
    p.add_argument("--camera", metavar="NAME", help="the camera the boxes are in (default: the first colour camera)")
    p.add_argument("--frame", type=int, metavar="N", help="the annotated frame of that camera (default: 0)")
    p.set_defaults(run=_cmd_annotate, prog="ortf annotate")


def _cmd_annotate(args: argparse.Namespace) -> int:
    root = paths.input_dir(args.dataset, DATASET)
    objects = read_objects_file(paths.input_file(args.objects, "a JSON or YAML file of objects"))
    with naming(root):
        written, directory = annotate_episode(root, args.episode, objects, camera=args.camera, frame=args.frame)
    print(
        f"episode {args.episode}: {len(written.objects)} object(s) on frame {written.annotated_frame} of camera "
        f"{written.camera!r} in {directory}"
    )
    return EXIT_OK
