"""Approvals: sign requests that wait for a quorum of people (service.py, the moves that
end them in transitions.py, repository.py), and the webhook that announces their state
changes (webhook.py)."""
