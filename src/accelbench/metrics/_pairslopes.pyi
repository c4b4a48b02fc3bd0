# metrics/_pairslopes.c: Theil-Sen's pairwise slopes of a block of rows
from typing import Any

def block(t: Any, y: Any, a: int, b: int, lo: float, hi: float, /) -> tuple[int, bytes]: ...
