"""taskyard's dev launcher: the one way `make up`, the tests and the benchmark start taskyard's processes.

Dev-only: no service depends on it and no image installs it (the root pyproject's ``dev`` group does).
Each module does one job:

- ``process``: one service process from its console script, its output in a log file, stopped with
  SIGTERM and then a kill;
- ``ports``, ``readiness``: free ports, and waiting until an HTTP endpoint answers;
- ``service_env``: the environment that puts a process in one queue prefix and database schema;
- ``devllm``: the development model server, started and scripted;
- ``cluster``: the API, broker agent and workers of one test or benchmark, started and stopped at will;
- ``supervisor``: `make up`'s restart-with-backoff supervisor; ``up``: `make up` itself (scripts/up.py);
- ``local_model``: the real small model `make up` runs with no LLM endpoint (runtime, weights, server);
- ``checkout``: the checkout it runs from and its git-ignored ``.taskyard/`` state.
"""
