"""User administration and the own account: API, command line and services (docs/accounts.md)."""
