"""The web edge: the pages of CONTRACT section 10."""
