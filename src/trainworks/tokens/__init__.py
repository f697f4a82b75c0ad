"""API tokens: who may call the server, for which projects (rules.py), their records (store.py), and the
look-ups the HTTP app makes on every request (service.py)."""
