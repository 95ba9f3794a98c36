"""The emulated GitLab v4 REST API, as python-gitlab calls it (projects addressed by URL-encoded
path): one module per resource, assembled in `routes.py`."""
