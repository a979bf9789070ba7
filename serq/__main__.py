"""``python -m serq`` is the ``serq`` command."""

from .cli import console

console()
