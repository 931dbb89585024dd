"""`make up`: the whole of taskyard on this machine, with a model to talk to.

``main`` applies the migrations, then runs the API, the broker agent and one worker per specialist under
the ``Supervisor``; ``llm`` chooses and starts the model when no endpoint is configured (the real local
model, or the development server as a fallback); ``say`` is how it talks to the person running it.
scripts/up.py is its entry point.
"""
