"""Credentials stay with dftune: workloads get a scrubbed environment, error texts are redacted."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from dftune.core.secrets import is_secret, redact, scrubbed_environ
from dftune.tools.runner.bench import bench
from dftune.tools.runner.spec import SpecError, load_spec

SECRETS = {
    "OPENAI_API_KEY": "sk-proj-abcdef0123456789",
    "ANTHROPIC_API_KEY": "sk-ant-api03-0123456789",
    "HF_TOKEN": "hf_0123456789abcdefgh",
    "AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI/K7MDENG",
    "AWS_ACCESS_KEY_ID": "AKIAIOSFODNN7EXAMPLE",
    "DB_PASSWORD": "hunter2hunter2",
    "GOOGLE_APPLICATION_CREDENTIALS": "/home/u/creds-0123.json",
    "DATABASE_URL": "postgres://app:s3cr3t-pw@db.local/app",
    "MY_TOKEN": "tok-pass-me-please-01",
}


@pytest.mark.parametrize("name", sorted(SECRETS))
def test_credential_variables_are_recognized(name: str) -> None:
    assert is_secret(name, SECRETS[name])


@pytest.mark.parametrize(
    "name",
    [
        "PATH",
        "HOME",
        "LD_LIBRARY_PATH",
        "TOKENIZERS_PARALLELISM",
        "KEYBOARD",
        "OMP_NUM_THREADS",
        "DFTUNE_OPENAI_BASE_URL",
        "HTTPS_PROXY",
        "SLURM_JOB_ID",
    ],
)
def test_ordinary_variables_are_not(name: str) -> None:
    assert not is_secret(name, "http://proxy.local:3128" if "PROXY" in name else "1")


def test_the_scrubbed_environment_keeps_only_what_the_spec_names() -> None:
    env = {**SECRETS, "PATH": "/usr/bin"}
    kept, withheld = scrubbed_environ(env, allow=["MY_TOKEN"])
    assert kept == {"PATH": "/usr/bin", "MY_TOKEN": SECRETS["MY_TOKEN"]}
    assert withheld == sorted(set(SECRETS) - {"MY_TOKEN"})


def test_redact_replaces_every_credential_value() -> None:
    text = f"HTTP 401: Incorrect API key provided: {SECRETS['OPENAI_API_KEY']} (db {SECRETS['DATABASE_URL']})"
    out = redact(text, SECRETS)
    assert SECRETS["OPENAI_API_KEY"] not in out and "s3cr3t" not in out and out.count("***") == 2


def _envdump(tmp_path: Path, extra: str = "") -> Path:
    (tmp_path / "dump.py").write_text(
        "import os\nfor k, v in sorted(os.environ.items()):\n    print(f'{k}={v}')\n"
    )
    spec = tmp_path / "workload.toml"
    spec.write_text(
        'name = "envdump"\ncommand = ["{python}", "dump.py"]\nreplicates = 3\n'
        + extra
        + '[metric]\nkind = "wall_time"\n[tracing]\nmode = "off"\n'
    )
    return spec


def test_a_workload_that_prints_its_environment_sees_no_credential(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for k, v in SECRETS.items():
        monkeypatch.setenv(k, v)
    spec = load_spec(_envdump(tmp_path, 'pass_env = ["MY_TOKEN"]\n'))
    result = bench(spec, trace=False, workdir=tmp_path / "work")
    assert result.ok == 3
    printed = (tmp_path / "work" / "logs" / "r0.out").read_text()
    assert f"PATH={__import__('os').environ['PATH']}" in printed  # the dump ran, with the usual environment
    assert f"MY_TOKEN={SECRETS['MY_TOKEN']}" in printed  # asked for by name
    everything = b"".join(p.read_bytes() for p in (tmp_path / "work").rglob("*") if p.is_file())
    for name, value in SECRETS.items():
        if name != "MY_TOKEN":
            assert value.encode() not in everything, name
    (note,) = [n for n in result.notes if "withheld" in n]
    assert "OPENAI_API_KEY" in note and "MY_TOKEN" not in note and SECRETS["OPENAI_API_KEY"] not in note


def test_the_spec_asks_for_variables_by_exact_name(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match=r"pass_env: not an environment variable name .*'\*_TOKEN'"):
        load_spec(_envdump(tmp_path, 'pass_env = ["*_TOKEN"]\n'))
    with pytest.raises(SpecError, match="pass_env: names must be unique"):
        load_spec(_envdump(tmp_path, 'pass_env = ["A", "A"]\n'))
    assert load_spec(_envdump(tmp_path)).pass_env == []


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("MYSQL_PWD", "hunter22"),
        ("CI_JOB_JWT", "eyJhbGciOi.x.y"),
        ("SENTRY_DSN", "https://0123456789abcdef@o1.ingest.sentry.io/1"),
        ("GIT_REMOTE", "https://ghp_TOKEN123456@github.com/org/repo.git"),
    ],
)
def test_the_fourth_rounds_credentials_never_reach_the_workload(name: str, value: str) -> None:
    env, withheld = scrubbed_environ({name: value, "PWD": "/home/u", "OLDPWD": "/tmp", "HOME": "/home/u"})
    assert withheld == [name] and name not in env
    assert env["PWD"] == "/home/u" and env["OLDPWD"] == "/tmp"  # folders, not passwords


#: the fifth round: credentials that reached a workload's environment and logs
FIFTH = {
    "GPG_PASSPHRASE": "correct horse battery",
    "MY_PASSPHRASE": "staple-staple-staple",
    "DB_PASS": "hunter2hunter2",
    "HTTP_AUTHORIZATION": "Bearer eyJhbGciOiJIUzI1NiJ9.e30.sig",
    "AUTHORIZATION": "Basic dXNlcjpwYXNzd29yZA==",
    "AZURE_STORAGE_CONNECTION_STRING": "DefaultEndpointsProtocol=https;AccountName=a;AccountKey=bG9uZw==;"
    "EndpointSuffix=core.windows.net",
    "WEBHOOK_URL": "https://hooks.slack.com/services/T000/B000/XXXXXXXXXXXX",
}
#: values that carry a credential whatever the variable is called
CREDENTIAL_VALUES = [
    "https://data.example.org/set.tar?token=abc123def456",
    "https://acct.blob.core.windows.net/c/blob?sv=2022-11-02&se=2030&sig=Zm9vYmFy%3D",
    "https://maps.example.com/api/geocode?address=x&key=AIzaSyA0123456789",
    "https://s3.example.com/b/k?X-Amz-Credential=AKIA%2F&X-Amz-Signature=abcdef",
    "https://app.example.org/x?user=u&password=s3cr3t",
    "https://api.example.org/v1?client_id=1&client_secret=shh-0123",
    "http://localhost:8888/lab?token=0123456789abcdef",
    "https://discord.com/api/webhooks/1234567890/abcdefABCDEF",
    "Server=db;Database=app;User Id=u;Password=s3cr3t-pw;",
    "Endpoint=sb://x.servicebus.windows.net/;SharedAccessKeyName=k;SharedAccessKey=bG9uZw==",
    "BlobEndpoint=https://a.blob.core.windows.net/;SharedAccessSignature=sv=2022&sig=abc",
]


@pytest.mark.parametrize("name", sorted(FIFTH))
def test_the_fifth_rounds_credential_names_never_reach_the_workload(name: str) -> None:
    env, withheld = scrubbed_environ({name: FIFTH[name], "PATH": "/usr/bin"})
    assert withheld == [name] and env == {"PATH": "/usr/bin"}
    assert is_secret(name, "")  # by the name alone


@pytest.mark.parametrize("value", CREDENTIAL_VALUES)
def test_a_credential_in_a_url_or_connection_string_is_withheld_by_its_value(value: str) -> None:
    env, withheld = scrubbed_environ({"DATA_SOURCE": value, "HOME": "/home/u"})
    assert withheld == ["DATA_SOURCE"] and env == {"HOME": "/home/u"}
    assert value not in redact(f"the program said: {value}", {"DATA_SOURCE": value})


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("PWD", "/home/u"),
        ("OLDPWD", "/tmp"),
        ("PASSES", "3"),
        ("BYPASS_CACHE", "1"),
        ("COMPASS_HOME", "/opt/compass"),
        ("DATASET_URL", "https://data.example.org/set.tar?format=tar&page=2"),
        ("MONKEY_URL", "https://example.org/?monkey=1&sort=name"),
        ("WIKI", "https://example.org/wiki/Webhook"),
        ("LS_COLORS", "rs=0:di=01;34:ln=01;36:mh=00"),
        ("CONNECTION_TIMEOUT", "30"),
    ],
)
def test_ordinary_names_and_values_are_still_passed(name: str, value: str) -> None:
    assert not is_secret(name, value)


@pytest.mark.parametrize(
    "value",
    ["a" * 131072, "a://" * 32768, "a://" + "a-" * 65536, "https://x/" + "?a" * 65536, "?a-" * 43690 + "://"],
    ids=["letters", "schemes", "one-scheme-then-words", "queries", "separators-then-scheme"],
)
def test_the_value_rules_take_time_linear_in_a_long_value(value: str) -> None:
    """A 128 KiB value (a certificate in base64) must not take seconds per variable: a URL scheme
    tried again from every letter made the first rule quadratic."""
    started = time.monotonic()
    scrubbed_environ({"BLOB": value})
    redact("text", {"BLOB": value})
    assert time.monotonic() - started < 1.0


def test_round_six_credentials_are_withheld_and_ordinary_variables_pass() -> None:
    """sshpass's variable, *_PW, a whole header line, and tokens known by their shape under any name."""
    from dftune.core.secrets import is_secret

    withheld = {
        "SSHPASS": "hunter2",
        "LDAP_BIND_PW": "x",
        "REGISTRY_PW": "x",
        "CURL_HDR": "Authorization: Basic dXNlcjpwYXNzd29yZA==",
        "EXTRA_ARGS": '-H "Authorization: Bearer abcdefghij12345"',
        "SOME_VALUE": "ghp_" + "a" * 36,
        "OTHER": "sk-proj-" + "b" * 30,
        "CHAT": "xoxb-1234567890-abcdef",
        "ID": "AKIAABCDEFGHIJKLMNOP",
        "PGCONN": "host=db user=u password=pgVAL3",
        "NETRC_LIKE": "machine h login u password pwVAL444",
        "HDR2": "X-Api-Key: apikeyVAL2",
    }
    assert [k for k, v in withheld.items() if not is_secret(k, v)] == []
    ordinary = {
        "PATH": "/usr/bin",
        "PWD": "/x",
        "BYPASS_X": "1",
        "KEYWORDS": "sk-learn",
        "LS_COLORS": "di=01;34",
    }
    assert [k for k, v in ordinary.items() if is_secret(k, v)] == []
