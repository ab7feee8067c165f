"""The `gpuscope` command: one thin module per subcommand over the API, registered by ``main.py``."""
