"""taskyard's specialist worker: consumes one specialist's queue and runs each task's agent loop."""
