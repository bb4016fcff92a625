"""A digest of the floodsim code that runs: the manifest's record of which code made a run.

The package's version stays ``0.1.0`` from one commit to the next, so a manifest naming it
cannot tell the code that wrote a run from code changed since. The digest covers every file of
the package (modules, JSON Schemas, the shipped prompt and curve sets), so a run resumed under
other code than it started with is told apart (:func:`simulation.runner.resume_run` warns), and
a run's results can be traced to the code that made them.
"""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path

__all__ = ["code_digest"]

_PACKAGE = Path(__file__).resolve().parent


@functools.cache
def code_digest() -> str:
    """SHA-256 of the package's files, by path and content (hex; 2 to 7 ms, once a process).

    Bytecode caches are left out: they differ between machines for the same source.
    """
    digest = hashlib.sha256()
    files = sorted(
        path
        for path in _PACKAGE.rglob("*")
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc"
    )
    for path in files:
        digest.update(path.relative_to(_PACKAGE).as_posix().encode())
        digest.update(b"\0")
        digest.update(path.read_bytes())
        digest.update(b"\0")
    return digest.hexdigest()
