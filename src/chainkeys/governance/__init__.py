"""Governance: changes to a tenant's rules by a quorum of admins (docs/governance.md)."""
