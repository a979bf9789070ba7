"""Trace files: public LLM request traces into serQ's trace CSV (``serq trace import``;
``docs/traces.md``), and the reader of that CSV (``docs/replay.md``).

* :mod:`.reader` — the trace CSV a program replays (``arrive trace``, ``--trace``);
* :mod:`.formats` — the formats ``serq trace import`` reads, one module each
  (:mod:`.splitwise`, :mod:`.azure`, :mod:`.mooncake`, :mod:`.burstgpt`), built on
  :mod:`.base`;
* :mod:`.convert` — the import itself, read and written as a stream.

The names below are imported on first use, so that the simulator, which needs
only the reader, does not load the importers.

>>> import serq.traces
>>> summary = serq.traces.import_trace("azure", "AzureLLMInferenceTrace_conv.csv", "conv.csv")  # doctest: +SKIP
>>> summary.rows  # doctest: +SKIP
19366
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .base import Format, Request
    from .convert import HEADER, ImportSummary, import_trace
    from .formats import FORMATS, format_names, get_format

__all__ = ["FORMATS", "HEADER", "Format", "ImportSummary", "Request", "format_names", "get_format", "import_trace"]

#: Each public name → the module that defines it.
_HOME = {"FORMATS": "formats", "format_names": "formats", "get_format": "formats", "Format": "base",
         "Request": "base", "HEADER": "convert", "ImportSummary": "convert", "import_trace": "convert"}


def __getattr__(name: str) -> Any:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{home}", __name__), name)
    globals()[name] = value
    return value
