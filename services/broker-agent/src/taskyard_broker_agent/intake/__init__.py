"""The intake queue's consumer: what to do with an intake message (``decisions``, pure) and the handler
that carries it out (``handler``)."""
