"""The reasoner's deterministic parts: the summary's fact check, retry-after, failure classes, settings."""

from __future__ import annotations

from email.utils import formatdate
from typing import Any

import pytest

from dftune.agents.reasoner import ReasonerError, transport
from dftune.agents.reasoner.summary import check_summary

GIVEN: dict[str, Any] = {
    "facts": {
        "workload": "reader",
        "io_fraction": 0.75,
        "unoverlapped_fraction": 0.6,
        "bottlenecks": [
            {"category": "small-io", "score": 5, "evidence": "13,331 reads of 4 KiB, 99% of I/O time"}
        ],
        "kb_prior_pct": {"l1.dataloader_prefetch": 12.0},
        "history": [
            {"proposal": "WORKERS=4", "verdict": "win", "change_pct": 40.4},
            {"proposal": "SLOW=1", "verdict": "regression", "change_pct": -18.2},
        ],
    },
    "outcome": {
        "experiments": 2,
        "wins": [{"strategy": "l1.dataloader_workers", "proposal": "WORKERS=4", "change_pct": 40.4}],
        "overall_pct": 40.4,
        "baseline_median": 0.5233,
        "best_median": 0.3118,
    },
}
WINS = {"WORKERS=4"}


def _check(text: str) -> tuple[list[str], list[str]]:
    c = check_summary(text, GIVEN, wins=WINS)
    return c.kept, c.dropped


@pytest.mark.parametrize(
    "sentence",
    [
        "The reader spent 75% of its time in I/O, mostly 4 KiB reads (99% of I/O time).",
        "WORKERS=4 cut the epoch time by 40.4% and was kept.",
        "WORKERS=4 gave about 40% (l1.dataloader_workers).",
        "SLOW=1 made it 18.2% slower and was reverted.",
        "The median went from 0.5233 to 0.3118 over 2 experiments.",
        "Overall the run improved by +40.4%.",
    ],
)
def test_true_sentences_are_kept(sentence: str) -> None:
    kept, dropped = _check(sentence)
    assert kept == [sentence] and dropped == []


@pytest.mark.parametrize(
    ("sentence", "why"),
    [
        ("Fewer epochs (EPOCHS=1) was the best fix: +95% faster.", "names EPOCHS=1"),
        ("WORKERS=4 made it 95% faster.", "cites 95%"),
        ("WORKERS=4 gained 40.9%.", "cites 40.9%"),
        ("WORKERS=4 gained -40.4%.", "cites -40.4%"),
        ("SLOW=1 gave 40.4%.", "attributes 40.4% to SLOW=1"),
        ("SLOW=1 was the best change.", "calls SLOW=1 a success"),
        ("It ran 3x faster.", "cites 3x"),
        ("| opt | change |", "a table"),
        ("Use l2.romio_hints next.", "names l2.romio_hints"),
    ],
)
def test_sentences_that_do_not_hold_are_dropped_with_the_reason(sentence: str, why: str) -> None:
    kept, dropped = _check(sentence)
    assert kept == [] and len(dropped) == 1 and why in dropped[0]


def test_only_the_false_sentences_go() -> None:
    kept, dropped = _check("WORKERS=4 won (+40.4%). EPOCHS=1 won +95%.\n\n| a | b |\nSLOW=1 was reverted.")
    assert kept == ["WORKERS=4 won (+40.4%).", "SLOW=1 was reverted."] and len(dropped) == 2


class _Response:
    def __init__(self, status: int, headers: dict[str, str]) -> None:
        self.status_code, self.headers = status, headers


class _HTTPError(Exception):
    def __init__(self, status: int, headers: dict[str, str] | None = None) -> None:
        super().__init__(f"HTTP {status}")
        self.status_code = status
        self.response = _Response(status, headers or {})


def test_retry_after_in_seconds_milliseconds_or_as_a_date() -> None:
    assert transport.retry_after(_HTTPError(429, {"retry-after": "7"})) == 7.0
    assert transport.retry_after(_HTTPError(429, {"retry-after-ms": "250", "retry-after": "9"})) == 0.25
    when = transport.retry_after(_HTTPError(503, {"retry-after": formatdate(__import__("time").time() + 30)}))
    assert when is not None and 25 <= when <= 31
    assert transport.retry_after(_HTTPError(429, {"retry-after": "soon"})) is None


@pytest.mark.parametrize(
    ("status", "retryable", "permanent"),
    [
        (429, True, False),
        (500, True, False),
        (502, True, False),
        (529, True, False),
        (408, True, False),
        (400, False, False),
        (401, False, True),
        (403, False, True),
        (404, False, True),
    ],
)
def test_which_failures_are_retried(status: int, retryable: bool, permanent: bool) -> None:
    f = transport.classify(_HTTPError(status, {"retry-after": "1"}))
    assert (f.retryable, f.permanent) == (retryable, permanent)
    assert f.retry_after_s == (1.0 if retryable else None)


def test_timeouts_and_lost_connections_are_retried() -> None:
    assert transport.classify(TimeoutError("read timed out")).retryable
    assert transport.classify(ConnectionResetError("reset")).retryable
    assert not transport.classify(KeyError("x")).retryable


def test_a_client_without_its_key_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.setenv("DFTUNE_ANTHROPIC_BASE_URL", "http://127.0.0.1:9")
    with pytest.raises(ReasonerError, match=r"^--model anthropic:c: ANTHROPIC_API_KEY is not set$"):
        transport.build_chat_model("anthropic:c")


def test_the_backoff_grows_and_is_capped() -> None:
    waits = [transport.backoff(i, 1.0) for i in range(10)]
    assert 0.5 <= waits[0] <= 1.0 and 2.0 <= waits[2] <= 4.0 and max(waits) <= transport.MAX_BACKOFF_S
