"""Choosing a specialist for a request: the LLM router (``router``), the deterministic rules router
(``rules``, over ``text`` and ``ngrams``), the directive guard, the decision cache and the routing prompt.

Pure of the broker and the store: the intake handler records and publishes what these decide.
"""
