"""The dead-letter queue's consumer (``consumer``) and how it reads a dead-lettered message (``parsing``)."""
