"""The in-job contract of Vertex AI custom training, as pure functions shared by every backend."""
