"""The suite's folders mirror ``serq/`` (frontend, sim, sim/stages, policies, experiments,
traces, calibration, draw) beside ``docs`` and ``programs``; the tests of the top-level
modules (the CLI, the report, fpmath) stay here.  Helpers shared across folders
(``frontend_util``) live in this folder, which is put on ``sys.path`` for them."""

import sys
from pathlib import Path

_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)
