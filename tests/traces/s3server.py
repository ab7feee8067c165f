"""A real S3-compatible server on loopback (moto's server mode) holding trace objects, with IAM enforced.

moto checks credentials and IAM policies only after its first ``INITIAL_NO_AUTH_ACTION_COUNT`` actions, so the
set-up (bucket, objects, users, their policies and keys) runs as exactly that many unchecked actions, and every
request after it is signed and authorised as on AWS: the ``reader`` may list and read, the ``lister`` may only
list (its reads are denied).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

BUCKET = "traces"
REGION = "us-east-1"


@dataclass(frozen=True)
class Keys:
    access_key_id: str
    secret_access_key: str


@dataclass(frozen=True)
class S3Server:
    endpoint: str
    reader: Keys
    lister: Keys

    def env(self, keys: Keys, home: Path) -> dict[str, str]:
        """The environment a client of this server runs with: the keys, the endpoint as the AWS tools read it
        (AWS_ENDPOINT_URL), and no profile or instance metadata of the machine's own."""
        return {"AWS_ACCESS_KEY_ID": keys.access_key_id, "AWS_SECRET_ACCESS_KEY": keys.secret_access_key,
                "AWS_DEFAULT_REGION": REGION, "AWS_ENDPOINT_URL": self.endpoint,
                "AWS_CONFIG_FILE": str(home / "no-aws-config"), "AWS_SHARED_CREDENTIALS_FILE": str(home / "no-creds"),
                "AWS_EC2_METADATA_DISABLED": "true"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_up(endpoint: str, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"moto server exited with {proc.returncode}")
        try:
            urllib.request.urlopen(f"{endpoint}/moto-api/", timeout=1).close()  # not an S3 action: not counted
            return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError("moto server did not start in 60 s")


Action = Callable[[Any, Any], Any]

LIST = ("s3:ListBucket", "s3:ListObjectsV2")
"""Listing a bucket. AWS checks ListObjectsV2 against ``s3:ListBucket``; moto from 5.2.6 checks it against the
operation's own name, so a policy names both to mean the same on either."""
READ = ("s3:GetObject", "s3:HeadObject")
"""Reading an object: ``s3:GetObject`` on AWS covers HeadObject too; moto from 5.2.6 checks HeadObject by name."""


def _policy(*actions: str) -> str:
    return json.dumps({"Version": "2012-10-17",
                       "Statement": [{"Effect": "Allow", "Action": list(actions), "Resource": "*"}]})


@contextmanager
def s3_server(objects: dict[str, bytes], pending: dict[str, bytes], tmp: Path) -> Iterator[S3Server]:
    """A moto server with ``objects`` (key -> bytes) in the bucket, and ``pending``: multipart uploads started
    with one part and never completed (what a killed upload leaves: no object)."""
    import boto3

    keys: dict[str, Keys] = {}

    def user(name: str, policy: str) -> list[Action]:
        def key(_s3: Any, iam: Any) -> None:
            made = iam.create_access_key(UserName=name)["AccessKey"]
            keys[name] = Keys(made["AccessKeyId"], made["SecretAccessKey"])

        return [lambda _s3, iam: iam.create_user(UserName=name),
                lambda _s3, iam: iam.put_user_policy(UserName=name, PolicyName=name, PolicyDocument=policy), key]

    def start(key: str, part: bytes) -> list[Action]:
        upload: dict[str, str] = {}

        def begin(s3: Any, _iam: Any) -> None:
            upload["id"] = s3.create_multipart_upload(Bucket=BUCKET, Key=key)["UploadId"]

        return [begin, lambda s3, _iam: s3.upload_part(Bucket=BUCKET, Key=key, PartNumber=1,
                                                       UploadId=upload["id"], Body=part)]

    actions: list[Action] = [lambda s3, _iam: s3.create_bucket(Bucket=BUCKET)]
    actions += [lambda s3, _iam, k=k, v=v: s3.put_object(Bucket=BUCKET, Key=k, Body=v) for k, v in objects.items()]
    for key, part in pending.items():
        actions += start(key, part)
    actions += user("reader", _policy(*LIST, *READ)) + user("lister", _policy(*LIST))

    port = _free_port()
    endpoint = f"http://127.0.0.1:{port}"
    env = {**os.environ, "INITIAL_NO_AUTH_ACTION_COUNT": str(len(actions))}
    log = (tmp / "moto.log").open("wb")
    proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)], env=env,
                            stdout=log, stderr=subprocess.STDOUT)
    try:
        _wait_up(endpoint, proc)
        session = boto3.session.Session(aws_access_key_id="setup", aws_secret_access_key="setup-secret",
                                        region_name=REGION)
        s3, iam = session.client("s3", endpoint_url=endpoint), session.client("iam", endpoint_url=endpoint)
        for action in actions:
            action(s3, iam)
        yield S3Server(endpoint=endpoint, reader=keys["reader"], lister=keys["lister"])
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()
