"""The event loop accelbench's load workers and servers run on."""

from __future__ import annotations


def install_uvloop() -> bool:
    """Use uvloop where it is installed (much less CPU per socket event); asyncio's own
    loop otherwise. Returns whether uvloop is in use."""
    try:
        import uvloop
    except ImportError:
        return False
    uvloop.install()
    return True
