"""Bounded network I/O: one deadline for a whole command, and HTTP requests that end by it whatever the server
does, with each step's own limit, a cap on the answer and credentials kept out of every message."""
