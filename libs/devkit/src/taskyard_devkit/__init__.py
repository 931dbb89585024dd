"""taskyard's dev launcher: the one way `make up`, the tests and the benchmark start taskyard's processes.

Dev-only: no service depends on it and no image installs it (the root pyproject's ``dev`` group does).
"""
