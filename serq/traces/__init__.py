"""Public LLM request traces into serQ's trace CSV (``serq trace import``; ``docs/traces.md``).

>>> import serq.traces
>>> summary = serq.traces.import_trace("azure", "AzureLLMInferenceTrace_conv.csv", "conv.csv")  # doctest: +SKIP
>>> summary.rows  # doctest: +SKIP
19366
"""

from .importers import FORMATS, HEADER, Format, ImportSummary, Request, format_names, get_format, import_trace

__all__ = ["FORMATS", "HEADER", "Format", "ImportSummary", "Request", "format_names", "get_format", "import_trace"]
