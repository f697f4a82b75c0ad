"""One package per resource kind: wire model, rules, store, service, controller, routes, client, CLI."""
