"""Webhook deliveries: the dispatcher drains the outbox the store's terminal transitions write."""
