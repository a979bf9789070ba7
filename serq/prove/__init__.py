"""``serq prove``: claims decided over every path of a family of workloads, on an
exact reference semantics (:mod:`serq.prove.exact`, :mod:`serq.prove.machine`).

From Python::

    from serq.prove import prove
    proof = prove(serq.load("programs/papers/dai_sarathi.sq"))
    [(v.name, v.verdict) for v in proof.verdicts]; proof.text(); proof.to_dict()

The package reads ``serq.ir`` and never the simulator (docs/claims.md).
"""

from __future__ import annotations

from .explore import Limits, Verdict
from .family import Bound
from .verdicts import Proof, prove

__all__ = ["prove", "Proof", "Verdict", "Bound", "Limits"]
