"""Tenants and their API tokens: who may call, with which scopes."""
