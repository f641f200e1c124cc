"""A real S3 API on loopback for the object storage tests: moto's server in a process of its
own (``python -m moto.server``) on 127.0.0.1, a free port, stopped when the test is done.

moto accepts any credentials until told to check them (``require_signatures``): then a
request must be signed with an access key of a user in its IAM, which ``S3Server`` makes
beforehand, so a wrong secret is refused as S3 refuses it (403, SignatureDoesNotMatch).
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import boto3
import moto  # noqa: F401  (what this module needs: test/support/needs.py reads the imports)
import pyarrow.fs as pafs

from support.child_process import kill_if_running

REGION = "us-east-1"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


class S3Server:
    """moto's S3 on 127.0.0.1:``port``, with a user whose key ``environment`` gives."""

    def __init__(self, log: Path) -> None:
        self.port = free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self._log = open(log, "wb")  # noqa: SIM115  (closed in stop)
        self._child = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)],
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 60
        while not self._answers():
            if self._child.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"moto's server did not start on port {self.port}: see {log}")
            time.sleep(0.1)
        iam = boto3.client("iam", **self._client_options("any", "any"))
        iam.create_user(UserName="reader")
        policy = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}
        iam.put_user_policy(UserName="reader", PolicyName="all", PolicyDocument=json.dumps(policy))
        key = iam.create_access_key(UserName="reader")["AccessKey"]
        self.access_key, self.secret_key = key["AccessKeyId"], key["SecretAccessKey"]

    def _answers(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.endpoint}/moto-api/data.json", timeout=1):
                return True
        except (urllib.error.URLError, OSError):
            return False

    def _client_options(self, access_key: str, secret_key: str) -> dict[str, str]:
        return {
            "endpoint_url": self.endpoint,
            "region_name": REGION,
            "aws_access_key_id": access_key,
            "aws_secret_access_key": secret_key,
        }

    def environment(self, secret_key: str | None = None) -> dict[str, str]:
        """The variables a reader finds the server and the user's key by (``secret_key``: another)."""
        return {
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_ACCESS_KEY_ID": self.access_key,
            "AWS_SECRET_ACCESS_KEY": secret_key or self.secret_key,
            "AWS_DEFAULT_REGION": REGION,
        }

    def filesystem(self) -> pafs.S3FileSystem:
        """A writer's view of the server (buckets made as needed)."""
        return pafs.S3FileSystem(
            access_key=self.access_key,
            secret_key=self.secret_key,
            endpoint_override=f"127.0.0.1:{self.port}",
            scheme="http",
            region=REGION,
            allow_bucket_creation=True,
        )

    def upload(self, directory: Path, bucket: str, prefix: str) -> str:
        """Every file under ``directory`` put under ``s3://bucket/prefix``; that URL."""
        s3 = self.filesystem()
        s3.create_dir(bucket)
        pafs.copy_files(str(directory), f"{bucket}/{prefix}", destination_filesystem=s3)
        return f"s3://{bucket}/{prefix}"

    def require_signatures(self) -> None:
        """From now on, every request must be signed with the user's key (moto's IAM checks)."""
        request = urllib.request.Request(
            f"{self.endpoint}/moto-api/reset-auth", data=b"0", method="POST", headers={"Content-Type": "text/plain"}
        )
        with urllib.request.urlopen(request, timeout=10):
            pass

    def stop(self) -> None:
        kill_if_running(self._child)
        self._log.close()
