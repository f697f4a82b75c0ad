"""Thin HTTP routers: parse the request, call a service, return its JSON."""
