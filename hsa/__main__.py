"""``python -m hsa``: the ``hsa`` command."""

from hsa.cli import main

main()
