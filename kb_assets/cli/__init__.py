"""The ``kb`` command: ``main`` holds the Typer app and the commands people run most; the other
modules each hold one group (``diff``, ``obligations``, ``references``, ``requests``, ``sync``,
``migrate``). Commands import what they need when they run (``tests/test_cli_imports.py``).
"""
