"""The web console: a single-page app served by the server itself at ``/console`` (see :mod:`.router`)."""
