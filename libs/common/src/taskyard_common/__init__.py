"""Shared library of taskyard: the only code the services share. No entry points live here."""
