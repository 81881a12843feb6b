"""What the service tells operators from outside the process: metrics and traces."""
