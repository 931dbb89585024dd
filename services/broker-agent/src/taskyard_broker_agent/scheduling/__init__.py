"""Cron schedules: the scheduler loop (``scheduler``) and what it does with one due schedule (``plan``)."""
