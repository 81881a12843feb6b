"""HTTP infrastructure every router shares, with no domain in it: errors, request bodies and
their limits, validation, pagination, middleware, health, the metrics endpoint, 405's `Allow`,
the API docs and the OpenAPI helpers, and the dependencies on the database and configuration."""
