"""ament_python build of ortf_ros that also installs with plain ``pip install .``.

colcon uses the data_files to place the ament index marker, package.xml, launch and
config files under ``share/ortf_ros``; pip without ROS gets the ROS-free library and
the command-line tools.
"""

from glob import glob
from pathlib import Path

from setuptools import find_packages, setup

PACKAGE = "ortf_ros"
# PyPI's project page is the README (MANIFEST.in puts it in the sdist, so a wheel built from
# the sdist has it too); read beside this file, wherever pip or colcon runs it from
README = (Path(__file__).resolve().parent / "README.md").read_text(encoding="utf-8")

setup(
    name=PACKAGE,
    version="0.1.0",
    description="ROS 2 teleoperation to ORTF v0.2 training datasets",
    long_description=README,
    long_description_content_type="text/markdown",
    license="Apache-2.0",
    keywords=["ros2", "robotics", "teleoperation", "imitation-learning", "dataset", "lerobot", "rosbag", "mcap"],
    classifiers=[
        "Development Status :: 3 - Alpha",
        "Intended Audience :: Developers",
        "Intended Audience :: Science/Research",
        "Programming Language :: Python :: 3",
        "Programming Language :: Python :: 3 :: Only",
        "Programming Language :: Python :: 3.10",
        "Programming Language :: Python :: 3.11",
        "Programming Language :: Python :: 3.12",
        "Programming Language :: Python :: 3.13",
        "Topic :: Scientific/Engineering :: Artificial Intelligence",
        "Typing :: Typed",
    ],
    python_requires=">=3.10",
    # ortf: the spec's own Python API (`from ortf import load_dataset`), a thin face over ortf_ros
    packages=find_packages(include=[PACKAGE, f"{PACKAGE}.*", "ortf"]),
    # the review page's own HTML assets (ortf_ros/review/static), served from the installed package
    package_data={PACKAGE: ["py.typed"], "ortf": ["py.typed"], f"{PACKAGE}.review": ["static/*.js", "static/*.css"]},
    data_files=[
        ("share/ament_index/resource_index/packages", [f"resource/{PACKAGE}"]),
        (f"share/{PACKAGE}", ["package.xml"]),
        (f"share/{PACKAGE}/launch", glob("launch/*.launch.py")),
        (f"share/{PACKAGE}/config", glob("config/*.yaml")),
    ],
    install_requires=[
        "numpy>=1.24",
        "pyarrow>=14",
        "av>=12",
        # RGB to yuv420p for the encoder (io/colour.py); headless: no GUI libraries to pull in
        "opencv-python-headless>=4.8",
        "pyyaml>=6",
        "rich>=13",
        "datasketches>=5",
        "rosbags>=0.11",
        # imported directly by the bag source (chunk decompression), also rosbags' own
        "lz4>=4",
        "backports.zstd>=1",
        # Foxglove's MCAP reader: walks a recording cut short without its summary (sources/mcap_salvage.py)
        "mcap>=1.2",
    ],
    extras_require={
        # `ortf-bag2ortf --ray`: recordings converted as Ray tasks, on this machine or a cluster.
        "ray": ["ray>=2.9"],
        # `ortf export rlds`: TFDS writes the dataset (TensorFlow's CPU build where it exists).
        "rlds": [
            "tensorflow-datasets>=4.9",
            "tensorflow-cpu>=2.16; platform_system != 'Darwin'",
            "tensorflow>=2.16; platform_system == 'Darwin'",
        ],
        # `ortf export rerun`: the Rerun SDK writes the .rrd. Held to one release: Rerun's API
        # changes with every minor version (0.x), and the export uses its named transform frames.
        # (0.41 needs Python 3.11 or newer.)
        "rerun": ["rerun-sdk>=0.41,<0.42"],
        # `ortf review`: a small ASGI app (Starlette on uvicorn); plotly for the plotly.min.js
        # its package ships, which the page loads from this server (no CDN, no network).
        "review": ["starlette>=1.7,<2", "uvicorn>=0.30", "plotly>=5"],
        # `ortf export mixtrain --table delta|iceberg|ducklake`: delta-rs (commits the files the
        # export writes), pyiceberg with its SQL catalog on SQLite (add_files in a create-table
        # transaction, as 0.12 has them), and DuckDB's ducklake extension from its wheel (loaded
        # from the file, nothing downloaded; the wheel pins the DuckDB it was built for).
        "lake": [
            "deltalake>=1.0,<2",
            "pyiceberg[sql-sqlite]>=0.12,<1",
            "duckdb-extension-ducklake>=1.5,<1.6",
        ],
        # `from ortf.torch import OrtfDataset`: a range, for users; pin torch==2.13.0 where a
        # CPU-only machine installs it (scripts/torch-env.sh), since an unpinned torch from PyPI
        # is the CUDA build, several GB.
        "torch": ["torch>=2.3"],
        "test": [
            "pytest>=8",
            "pytest-timeout>=2",
            "duckdb>=1",
            "psutil>=5",
            # reads back the ROS 2 MCAP that `ortf export mcap` writes with another decoder than ours
            "mcap-ros2-support>=0.5",
            # Linters pinned: a new release must not fail CI on unchanged code.
            "mypy==2.4.1",
            "ruff==0.17.6",
            "types-PyYAML==6.0.12.20261113",
            # the --ray tests start a local Ray instance
            "ray>=2.9",
            # the Rerun export's tests read the .rrd back with Rerun's dataframe API (DataFusion);
            # Rerun 0.41 needs Python 3.11: on 3.10 those tests skip, naming what is missing
            "rerun-sdk[catalog]>=0.41,<0.42; python_version >= '3.11'",
            # `ortf review` and its browser tests (Debian's chromium and chromedriver: scripts/setup-env.sh)
            "starlette>=1.7,<2",
            "uvicorn>=0.30",
            "plotly>=5",
            "selenium>=4.20",
            # Starlette's TestClient (test_annotations asks the review app for the annotated frame)
            "httpx>=0.27",
            # the lake tables of `ortf export mixtrain --table`, read back with their own readers
            "deltalake>=1.0,<2",
            "pyiceberg[sql-sqlite]>=0.12,<1",
            "duckdb-extension-ducklake>=1.5,<1.6",
            # test_rosdep: rosdep itself resolves package.xml offline against ../shared/rosdistro
            "rosdep>=0.25",
            # test_object_storage: a real S3 API on loopback (moto's server), read through pyarrow's S3
            "moto[server]>=5",
            # test_wheel: the sdist and wheel built as a release is, and checked as PyPI checks them
            "build>=1.2",
            "twine>=5",
        ],
    },
    zip_safe=True,
    entry_points={
        "console_scripts": [
            "ortf = ortf_ros.cli.entry:ortf",
            "ortf-bag2ortf = ortf_ros.cli.entry:bag2ortf",
            # ROS 2 nodes: `ros2 run ortf_ros ortf_player` (colcon installs them into lib/ortf_ros)
            "ortf_player = ortf_ros.ros.entry:player",
            "ortf_recorder = ortf_ros.ros.entry:recorder",
            # the synthetic scene published live: the recorder tried without a robot
            "ortf_scene_publisher = ortf_ros.ros.entry:scene_publisher",
        ],
    },
)
