"""Render the systemd units in systemd/ for an install: `lanner systemd render`."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from models.errors import LannerError
from workers.ops.templates import render_template
from workers.runtime.server import parse_bind

UNITS = ("lanner-web.service", "lanner-worker.service")
ENV_FILE = "lanner.env"
_NAME = re.compile(r"^[a-z_][a-z0-9_-]{0,31}$")


class UnitConfigError(LannerError, ValueError):
    """A value that cannot go into a unit file; the message says which and why."""


@dataclass(frozen=True)
class UnitOptions:
    venv: str  # The virtualenv holding `bin/lanner`, e.g. /opt/lanner/.venv.
    env_file: str = "/etc/lanner/lanner.env"
    data_dir: str = "/var/lib/lanner"
    user: str = "lanner"
    group: str = "lanner"
    bind: str = "unix:/run/lanner/web.sock"
    workers: int = 2


def render_units(options: UnitOptions) -> dict[str, str]:
    """{file name: text} for both units and the environment file they read."""
    for what, path in (
        ("venv", options.venv),
        ("env file", options.env_file),
        ("data dir", options.data_dir),
    ):
        if not path.startswith("/") or any(char.isspace() or char in "\"'$;%\\" for char in path):
            raise UnitConfigError(f"The {what} {path!r} must be an absolute path without spaces or quotes.")
    for what, name in (("user", options.user), ("group", options.group)):
        if not _NAME.match(name):
            raise UnitConfigError(f"The {what} {name!r} is not a valid system account name.")
    try:
        where = parse_bind(options.bind)
    except ValueError as exc:
        raise UnitConfigError(str(exc)) from None
    if where[0] == "tcp" and where[2] == 0:
        raise UnitConfigError(f"bind {options.bind!r} has port 0; the units need the port nginx proxies to.")
    if options.workers < 1:
        raise UnitConfigError("At least one web worker is needed.")
    values = {
        "VENV": options.venv.rstrip("/"),
        "ENV_FILE": options.env_file,
        "DATA_DIR": options.data_dir,
        "USER": options.user,
        "GROUP": options.group,
        "BIND": options.bind,
        "WORKERS": str(options.workers),
    }
    files = {unit: render_template(f"systemd/{unit}", values) for unit in UNITS}
    files[ENV_FILE] = render_template(f"systemd/{ENV_FILE}", values)
    return files


def write_units(options: UnitOptions, directory: Path) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in render_units(options).items():
        path = directory / name
        path.write_text(text)
        path.chmod(0o644)  # units and settings, no secret in them: not under lanner's umask
        written.append(path)
    return written
