"""Webhooks in the API: the ``webhook`` of a submission, and the routes over a task's deliveries."""
