"""Small helpers every domain shares: masking secrets, formatting times, waiting to retry."""
