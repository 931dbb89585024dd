"""taskyard's REST API: the producer that stores tasks, announces them on the bus and reports their state."""
