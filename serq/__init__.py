"""serQ: LLM serving systems as queueing programs, and their simulator.

The public surface::

    program = serq.load("programs/multi-turn/vllm.sq", sets={"Lambda": "0.6"})
    report = serq.run(program, seed=1, horizon=300, warmup=30)
    report.text(); report.to_json(); report.observe("hit").mean

Every error a program, its inputs or its run can cause is a :class:`SerqError`;
one found while the program runs (a negative amount, a run guard, a misbehaving
engine hook) is the subclass :class:`SerqRuntimeError`.
"""

from __future__ import annotations

from .api import check, load, run
from .errors import SerqError, SerqRuntimeError
from .ir import Program

__all__ = ["load", "check", "run", "Program", "Report", "SerqError", "SerqRuntimeError"]
__all__ += ["sweep", "SweepResult", "compare"]  # serq.experiments, imported on first use


def __getattr__(name: str):  # Report lives with the simulator, policies are engines: import them lazily
    if name == "Report":
        from .report import Report

        return Report
    if name == "policies":
        import importlib

        return importlib.import_module(".policies", __name__)
    if name in ("sweep", "SweepResult", "compare"):  # the experiments: imported on first use
        from . import experiments

        return getattr(experiments, name)
    raise AttributeError(name)
