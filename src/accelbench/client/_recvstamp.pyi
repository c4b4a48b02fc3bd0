# client/_recvstamp.c: ReceiveHub's compiled read loop
def read_ready(
    epfd: int, off_ns: int, prev_off_ns: int, prev_at_ns: int, max_age_ns: int, slack_ns: int, /
) -> list[tuple[int, bytes | None, int, int]]: ...
