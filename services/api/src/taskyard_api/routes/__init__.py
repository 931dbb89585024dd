"""One router per file; ``main.create_app`` includes them all."""
