"""The ``taskyard`` command line (typer and rich): ``app.py`` holds the entry point."""
