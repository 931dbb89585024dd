"""taskyard broker agent: reads new tasks from the intake queue, routes each to a specialist, publishes it."""
