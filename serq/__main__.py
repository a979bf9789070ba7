"""``python -m serq`` is the ``serq`` command."""

from .cli import main

main()
