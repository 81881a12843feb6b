"""Loopback fakes of outside systems, run as real HTTP servers on 127.0.0.1.

The service under test talks to them through its ordinary clients (the real SDKs, httpx):
tests swap the address, never the code path. `server.LoopbackServer` runs any ASGI app.
"""
