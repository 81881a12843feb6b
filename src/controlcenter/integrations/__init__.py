"""The operator's connection tests: one harmless call to each outside system with the stored
settings (`POST /api/v1/admin/integrations/{name}/test`)."""
