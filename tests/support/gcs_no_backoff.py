"""``python -m tests.support.gcs_no_backoff ARGS``: ``tbconvert ARGS`` with gcsfs retrying a
failed request without waiting between its attempts.

gcsfs makes six attempts at a request that fails to connect, sleeping 1, 2, 4, 8 and 16 s (and
up to a second more each) between them, and has no option for either: its ``retries`` is fixed
when its class is made.  A test of what a user sees once the attempts are spent needs the
attempts, not the waits: each one still happens, fails and is logged as it would be.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any


class _AsyncioWithoutWaits:
    """``asyncio`` as gcsfs's retry loop sees it: a sleep yields once and returns."""

    def __getattr__(self, name: str) -> Any:
        return getattr(asyncio, name)

    @staticmethod
    async def sleep(_delay: float) -> None:
        await asyncio.sleep(0)


def main() -> None:
    """Patch gcsfs's retry loop, then run the command line as ``python -m tbconvert``."""
    import gcsfs.retry

    gcsfs.retry.asyncio = _AsyncioWithoutWaits()  # type: ignore[assignment]
    from tbconvert.__main__ import main as tbconvert

    sys.argv[0] = "tbconvert"
    tbconvert()


if __name__ == "__main__":
    main()
