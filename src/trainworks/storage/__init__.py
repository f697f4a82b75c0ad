"""Object storage: gs:// URIs resolved through fsspec, a local bucket root by default."""
