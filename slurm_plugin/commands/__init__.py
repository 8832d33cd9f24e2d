"""The ``rankmap`` command: one module per subcommand (*_cli.py), the shared argument
types (args), and the site checks of ``rankmap config check``."""
