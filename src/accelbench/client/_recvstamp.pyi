# client/_recvstamp.c: ReceiveHub's compiled read loop, per-chunk path and relay
from typing import Any

def read_ready(
    epfd: int,
    off_ns: int,
    prev_off_ns: int,
    prev_at_ns: int,
    max_age_ns: int,
    slack_ns: int,
    fast: dict[int, tuple[Any, Any, list[int], list[str], bool, int, int]],
    counts: list[int],
    relay: dict[int, tuple[int, bytearray | None, int]] = ...,
    partial: dict[int, int] = ...,
    /,
) -> tuple[list[tuple[int, bytes | None, int, int]], int, int, int, int]: ...
def clock_offset() -> tuple[int, int]: ...
def take_frames(
    buf: bytearray,
    pos: int,
    fast: dict[int, tuple[Any, Any, list[int], list[str], bool, int, int]],
    /,
) -> int: ...
