"""HTTP infrastructure every router shares: dependencies, errors, request bodies, middleware."""
