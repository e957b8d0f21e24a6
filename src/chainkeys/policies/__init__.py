"""Signing policies: what a tenant's signatures may do, checked before any key opens."""
