"""Key-like runs are taken out of a provider's text before it is logged."""

from taskyard_worker.redaction import redact


def test_keys_and_masked_keys_are_redacted_words_are_not():
    text = "Incorrect API key provided: sk-proj-Ab12****wXyZ. Bearer tyk_3f9a_0123456789abcdef, HTTP 401"
    assert redact(text) == "Incorrect API key provided: [redacted] Bearer [redacted], HTTP 401"
    assert redact("context_length_exceeded: maximum context length is 8192 tokens") == (
        "context_length_exceeded: maximum context length is 8192 tokens"
    )
