"""Take key-like runs out of a provider's text before it is logged.

An LLM provider's error text may quote what the worker sent it, an API key included (an OpenAI 401 names the
masked key): such text is never stored where a tenant reads it, and is logged only through ``redact``.
"""

from __future__ import annotations

import re

# Runs that look like keys or tokens: letters, digits and ``_-*.`` with at least one digit or mask character.
_SECRETISH = re.compile(r"[A-Za-z0-9_\-*.]*[0-9*][A-Za-z0-9_\-*.]*")


def redact(text: str) -> str:
    """``text`` with every key-like run of 12 characters or more replaced by ``[redacted]``."""
    return _SECRETISH.sub(lambda m: "[redacted]" if len(m.group(0)) >= 12 else m.group(0), text)
