"""The suite's folders mirror ``serq/`` (frontend, sim, sim/stages, policies, experiments,
traces, calibration, draw) beside ``docs`` and ``programs``; the tests of the top-level
modules (the CLI, the report, fpmath) stay here.  Helpers shared across folders
(``frontend_util``) live in this folder, which is put on ``sys.path`` for them."""

import sys
from pathlib import Path

_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)

# No hypothesis test has a deadline (issue 38: no test depends on the clock).  Every
# `settings(...)` here says `deadline=None`; this profile makes it the default too, for a
# test that gives no settings (hypothesis's own default is 200 ms an example).
from hypothesis import settings  # noqa: E402

settings.register_profile("serq", deadline=None)
settings.load_profile("serq")

# Parsed files are kept on disk (serq/frontend/parsed.py): the suite keeps them in a folder of its
# own, made per process and removed at its end (subprocesses inherit it), never the user's cache.
import atexit  # noqa: E402
import os  # noqa: E402
import shutil  # noqa: E402
import tempfile  # noqa: E402

_CACHE = tempfile.mkdtemp(prefix="serq-test-parsed-")
os.environ["SERQ_CACHE_DIR"] = _CACHE
atexit.register(shutil.rmtree, _CACHE, True)
