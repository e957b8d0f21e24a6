"""Routes per domain: accounts (per family, from one table), service endpoints."""
