"""The audit log: who did what, when, through which token; never a secret."""

from chainkeys.audit.service import AuditService, audit_event

__all__ = ["AuditService", "audit_event"]
