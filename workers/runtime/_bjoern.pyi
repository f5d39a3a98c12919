# The C extension built from workers/runtime/bjoern-3.2.2 (setup.py): bjoern 3.2.2 with Lanner's patch.
from collections.abc import Callable, Iterable
from typing import Any

version: tuple[int, int, int, str]
features: dict[str, bool]

def server_run(
    sock: Any, wsgi_app: Callable[[dict, Callable[..., Any]], Iterable[bytes]], max_body_size: int, /
) -> None: ...
