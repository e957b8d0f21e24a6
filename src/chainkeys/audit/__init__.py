"""The audit log: who did what, when, through which token; never a secret."""
