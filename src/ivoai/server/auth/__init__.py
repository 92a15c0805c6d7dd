"""Enrollment codes, client credentials, OAuth provider, activation codes, scopes."""
