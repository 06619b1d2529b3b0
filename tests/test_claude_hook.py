"""``toolweave hook claude-code``'s own argument reading (the fast path that skips the CLI)."""

from __future__ import annotations

import pytest

from toolweave.server.fronts.host import HOOK_WAIT_S, parse_hook_wait


@pytest.mark.parametrize(
    ("args", "wait"),
    [
        ([], HOOK_WAIT_S),
        (["--wait", "2.5"], 2.5),
        (["--wait=0"], 0.0),
        (["--wait", "-1"], None),  # the CLI says what is wrong
        (["--wait", "soon"], None),
        (["--wait"], None),
        (["--help"], None),
        (["--wait", "1", "--extra"], None),
    ],
)
def test_the_hook_reads_wait_or_leaves_the_arguments_to_the_cli(args: list[str], wait: float | None) -> None:
    assert parse_hook_wait(args) == wait
