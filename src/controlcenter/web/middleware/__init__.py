"""Pure ASGI middleware, each answering or passing a request before the framework does."""
