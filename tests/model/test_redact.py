"""The one set of redaction rules: URLs, free text (what a storage library says back) and command lines, each rule
with a case that must be masked and one that must be left alone."""

from __future__ import annotations

import pytest

from gpuscope.model.redact import bare_url, redact_command, redact_text, redact_url, secret_name

PW = "S3cretPW"
ENV = {"AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI/K7MDENG", "AWS_ACCESS_KEY_ID": "AKIAIOSFODNN7EXAMPLE",
       "PWD": "/home/alice/project", "HF_TOKEN": "hf_abc"}
"""A secret (masked wherever quoted), an identity (kept), a path named PWD (kept) and a secret too short to look
for (8 characters or more are)."""


@pytest.mark.parametrize(("name", "secret"), [
    ("password", True), ("--password", True), ("PGPASSWORD", True), ("db.password", True), ("api_key", True),
    ("key", True), ("token", True), ("access_token", True), ("accessToken", True), ("HF_TOKEN", True),
    ("sig", True), ("X-Amz-Signature", True), ("X-Amz-Credential", True), ("X-Amz-Security-Token", True),
    ("X-Goog-Signature", True), ("AWS_SECRET_ACCESS_KEY", True), ("AccountKey", True), ("Authorization", True),
    ("Cookie", True), ("AZURE_STORAGE_CONNECTION_STRING", True),
    ("AWS_ACCESS_KEY_ID", False), ("password-file", False), ("keyfile", False), ("session-name", False),
    ("sv", False), ("se", False), ("sp", False), ("X-Amz-Date", False), ("monkey", False), ("design", False),
    ("signal", False), ("X-Scope-OrgID", False), ("SSH_AUTH_SOCK", False), ("PWD", False), ("lr", False),
])
def test_which_names_hold_secrets(name: str, secret: bool) -> None:
    assert secret_name(name) is secret


@pytest.mark.parametrize(("url", "shown"), [
    (f"http://alice:{PW}@host/x.json.gz", "http://***@host/x.json.gz"),
    (f"s3://AKIAXXXX:{PW}@bucket/job/", "s3://***@bucket/job/"),
    ("https://h/t.json?token=abc123&v=2", "https://h/t.json?token=***&v=2"),
    ("https://acct.blob.core.windows.net/c/t.json?sv=2021-08-06&sp=r&sig=a%2Fb%3D",
     "https://acct.blob.core.windows.net/c/t.json?sv=2021-08-06&sp=r&sig=***"),
    ("https://b.s3.amazonaws.com/k?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIA%2F20260101"
     "&X-Amz-Signature=deadbeef",
     "https://b.s3.amazonaws.com/k?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=***&X-Amz-Signature=***"),
    ("https://h/cb#access_token=abc&state=1", "https://h/cb#access_token=***&state=1"),
    ("https://h/x?key=abc", "https://h/x?key=***"),
    ("https://h:8443/plain/path?page=2", "https://h:8443/plain/path?page=2"),
    (f"http://[broken@{PW}", "***"),
])
def test_a_url_keeps_its_shape_and_loses_its_secrets(url: str, shown: str) -> None:
    assert redact_url(url) == shown


def test_a_trace_url_is_named_bare() -> None:
    assert bare_url(f"https://alice:{PW}@h:8443/t/rank0.json?sig=abc#frag") == "https://h:8443/t/rank0.json"
    assert bare_url(f"s3://K:{PW}@bucket/r.json") == "s3://bucket/r.json"


def test_text_from_a_library_loses_every_secret_it_quotes() -> None:
    text = (f'Invalid bucket name "AKIAXXXX:{PW}@bucket": must match; GET https://h/x?X-Amz-Signature=ff00 '
            f"failed; AccountKey=abc123==;EndpointSuffix=core.windows.net; Authorization: Bearer eyJhbGciOi; "
            f"key {ENV['AWS_SECRET_ACCESS_KEY']} in {ENV['PWD']}, id {ENV['AWS_ACCESS_KEY_ID']}, hf_abc")
    shown = redact_text(text, env=ENV)
    for secret in (PW, "ff00", "abc123", "eyJhbGciOi", ENV["AWS_SECRET_ACCESS_KEY"]):
        assert secret not in shown
    assert '"***@bucket"' in shown and "X-Amz-Signature=***" in shown and "AccountKey=***" in shown
    assert "Bearer ***" in shown and "EndpointSuffix=core.windows.net" in shown
    for kept in (ENV["PWD"], ENV["AWS_ACCESS_KEY_ID"], "hf_abc"):  # a path, an identity, a value too short
        assert kept in shown


def test_plain_text_is_left_alone() -> None:
    text = 'pod="a@b" at 10:30 http://prom.example/path@v2 user@example.com step=3 lr=0.1'
    assert redact_text(text, env={}) == text


@pytest.mark.parametrize(("words", "shown"), [
    (["python", "train.py", "--password", PW, "--lr", "0.1"], ["python", "train.py", "--password", "***", "--lr",
                                                                 "0.1"]),
    (["python", "train.py", f"--token={PW}", "-token", PW], ["python", "train.py", "--token=***", "-token", "***"]),
    ([f"PASSWORD={PW}", "WANDB_MODE=offline", "python", "t.py"], ["PASSWORD=***", "WANDB_MODE=offline", "python",
                                                                  "t.py"]),
    (["python", "t.py", f"db.password={PW}", "--password-file", "/run/pw", "--no-password", "--x"],
     ["python", "t.py", "db.password=***", "--password-file", "/run/pw", "--no-password", "--x"]),
    (["python", "t.py", "--data", f"s3://K:{PW}@b/x?token=t0k"], ["python", "t.py", "--data", "s3://***@b/x?token=***"]),
    (["curl", "-u", f"me:{PW}", "-H", f"Authorization: Bearer {PW}", "-H", "Accept: json", f"--header=Cookie: id={PW}"],
     ["curl", "-u", "***", "-H", "Authorization: ***", "-H", "Accept: json", "--header=Cookie: ***"]),
    (["sshpass", "-p", PW, "ssh", "host"], ["sshpass", "-p", "***", "ssh", "host"]),
    (["mysql", f"-p{PW}", "db"], ["mysql", "-p***", "db"]),
    (["mysql", "-p", "db"], ["mysql", "-p", "db"]),  # -p alone prompts: "db" is the database
    (["python", "t.py", "-p", "8080"], ["python", "t.py", "-p", "8080"]),  # -p means what the program says
    (["bash", "-c", f"PGPASSWORD={PW} psql -h db --password {PW}; echo done"],
     ["bash", "-c", "PGPASSWORD=*** psql -h db --password ***; echo done"]),
])
def test_a_command_line_loses_its_secrets(words: list[str], shown: list[str]) -> None:
    assert list(redact_command(words, env={})) == shown


def test_a_command_line_loses_the_environments_secrets_too() -> None:
    words = ["python", "t.py", ENV["AWS_SECRET_ACCESS_KEY"], "--dir", ENV["PWD"]]
    assert redact_command(words, env=ENV) == ("python", "t.py", "***", "--dir", ENV["PWD"])


@pytest.mark.parametrize(("text", "shown"), [
    ("endpoint http://h:9/metrics?token=abc: no answer within 0.5 s",
     "endpoint http://h:9/metrics?token=***: no answer within 0.5 s"),
    ("(see https://h/x?sig=abc), then https://h/y?key=def.", "(see https://h/x?sig=***), then https://h/y?key=***."),
    ("password=hunter2: refused; token=abc, again", "password=***: refused; token=***, again"),
    ("http://h/x?token=abc:def later", "http://h/x?token=*** later"),
])
def test_the_punctuation_after_a_masked_url_or_value_stays(text: str, shown: str) -> None:
    """What ends a URL or a secret's value (a colon before the message, a comma, a bracket, a full stop) is the
    text's: masked with the value, it ran the URL into the message. Inside a value it is the value's."""
    assert redact_text(text, env={}) == shown

