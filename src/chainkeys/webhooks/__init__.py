"""Webhooks: the durable outbox of events and their delivery."""
