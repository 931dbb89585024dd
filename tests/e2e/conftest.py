"""The whole system as real processes: the ``cluster`` fixture lives in tests/conftest.py (the fuzz suite
uses it too)."""
