"""The emulated GitHub REST API: one module per resource, assembled in `routes.py`."""
