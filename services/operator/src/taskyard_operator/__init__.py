"""taskyard operator: Specialist resources become worker objects, queues and a status."""
