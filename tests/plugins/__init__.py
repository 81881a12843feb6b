"""Per-domain pytest plugins: each starts its loopback fakes once per session and contributes
the configuration that points the service at them (`<domain>_config` fixtures)."""
