"""Long-running operations as a collection: routes and client (their store and service are the kernel's)."""
