"""The routing evaluation: a labelled set of requests to the shipped catalog and a runner that scores the
rules router and the LLM router (the broker agent's own ``Router`` class) against it."""
