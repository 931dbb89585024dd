"""A deterministic OpenAI-compatible development model server. NOT a real LLM.

It lets taskyard run end to end offline (``make up`` with no endpoint configured) and is the LLM the test
suite drives over HTTP: scripted replies, latency, errors and 429s per model name.
"""
