"""The API package's other console scripts: ``taskyard-migrate`` and ``taskyard-admin``."""
