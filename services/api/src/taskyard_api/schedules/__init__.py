"""Cron schedules over the API: their documents and the checks a schedule's task passes."""
